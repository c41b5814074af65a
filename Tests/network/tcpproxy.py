#!/usr/bin/env python3
"""A TCP proxy of the partition tests' own (Toxiproxy-style), which also relays across network
namespaces. Standard library only; run as root when a route names a namespace.

    tcpproxy.py [--seed N] ROUTE...
    ROUTE:  NAME=[NS@]HOST:PORT->[NS@]HOST:PORT    (listen here -> connect there)

`NS@` puts that side in the network namespace NS (`ip netns add NS`, i.e. /var/run/netns/NS):
the listening socket is made inside it, or each outgoing connection is. Without it, the side is
in the namespace the proxy was started in. A relay from an instance's namespace to a fake
server on the test's loopback is `fakes=n1@127.0.0.1:4443->127.0.0.1:4443`.

It prints `ready seed=N NAME=PORT…` once every route listens (the ports bound: a listening
port may be 0, the kernel's choice), then takes commands on standard input, one a line,
answering each with one line (`ok`, or JSON for `stats`):

    delay NAME MS   MS added to every chunk, in each direction (one-way latency)
    loss NAME P     each chunk, in each direction, is lost with probability P (see below)
    cut NAME        every open connection of the route is aborted (RST to both ends)
    stats           counters per route, as JSON

It exits when standard input closes (its test went away).

The model of loss. Between an instance and PostgreSQL the traffic is TCP, and TCP never loses
what it acknowledged: a lost segment is sent again after the retransmission timeout, and
everything behind it on that connection waits for it (in-order delivery). So a 5 % packet loss
shows as latency spikes, not as missing bytes. Each chunk read from one side is, with
probability P, "lost": it is held for one retransmission timeout, RTO = 200 ms + the round trip
(Linux: smoothed RTT + max(200 ms, 4 RTT variance)); lost again with probability P, the timeout
doubles (exponential back-off), up to 120 s. Chunks of a direction leave in order: one held
holds those behind it. A chunk is what one read returned (up to 64 KiB): a segment or a few,
so the loss rate is per read rather than per packet, which is close for the small messages of
the PostgreSQL protocol and milder for bulk transfers. Connections are not dropped at random:
packet loss does not close a TCP connection (`cut` does that, deliberately).
"""

import asyncio
import ctypes
import json
import os
import random
import socket
import sys
import time

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)
_home = os.open("/proc/self/ns/net", os.O_RDONLY)


def in_namespace(namespace, make):
    """Calls make() with this thread in `namespace` (sockets it creates stay there)."""
    if namespace is None:
        return make()
    fd = os.open("/var/run/netns/" + namespace, os.O_RDONLY)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns " + namespace)
        try:
            return make()
        finally:
            if _libc.setns(_home, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns back")
    finally:
        os.close(fd)


def endpoint(text):
    namespace = None
    if "@" in text:
        namespace, text = text.split("@", 1)
    host, port = text.rsplit(":", 1)
    return namespace, host, int(port)


class Route:
    def __init__(self, name, listen, target):
        self.name = name
        self.listen = listen
        self.target = target
        self.delay = 0.0
        self.loss = 0.0
        self.connections = set()
        self.stats = {"connections": 0, "failedConnects": 0, "chunks": 0, "lost": 0, "bytes": 0, "cuts": 0, "maxHeldMs": 0}

    def held_for(self):
        """The extra time one chunk is held: lost, sent again after the timeout, maybe lost again."""
        penalty = 0.0
        timeout = 0.2 + 2 * self.delay
        while self.loss > 0 and random.random() < self.loss:
            penalty += timeout
            timeout = min(timeout * 2, 120.0)
        if penalty > 0:
            self.stats["lost"] += 1
        return penalty


async def pump(route, reader, writer, connection):
    """One direction: read chunks, hold each for its delay (in order), write them on."""
    queue = asyncio.Queue()

    async def read():
        last = 0.0
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                now = time.monotonic()
                release = max(last, now + route.delay + route.held_for())
                route.stats["maxHeldMs"] = max(route.stats["maxHeldMs"], int((release - now) * 1000))
                last = release
                route.stats["chunks"] += 1
                route.stats["bytes"] += len(data)
                queue.put_nowait((release, data))
        except (ConnectionError, OSError):
            pass
        queue.put_nowait((last, None))

    async def write():
        try:
            while True:
                release, data = await queue.get()
                wait = release - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                if data is None:
                    if writer.can_write_eof():
                        writer.write_eof()
                    break
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass

    await asyncio.gather(read(), write())


async def serve(route, client_reader, client_writer):
    namespace, host, port = route.target
    try:
        sock = in_namespace(namespace, lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))
        sock.setblocking(False)
        await asyncio.wait_for(asyncio.get_running_loop().sock_connect(sock, (host, port)), 10)
        server_reader, server_writer = await asyncio.open_connection(sock=sock)
    except (OSError, asyncio.TimeoutError):
        route.stats["failedConnects"] += 1
        client_writer.transport.abort()
        return
    route.stats["connections"] += 1
    connection = (client_writer, server_writer)
    route.connections.add(connection)
    try:
        await asyncio.gather(pump(route, client_reader, server_writer, connection), pump(route, server_reader, client_writer, connection))
    finally:
        route.connections.discard(connection)
        for writer in connection:
            writer.close()


def listen(route):
    namespace, host, port = route.listen

    def make():
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
        sock.setblocking(False)
        return sock

    return in_namespace(namespace, make)


def command(routes, line):
    words = line.split()
    if not words:
        return "ok"
    if words[0] == "stats":
        return json.dumps({name: route.stats for name, route in routes.items()})
    if len(words) < 2 or words[1] not in routes:
        return "error: unknown route in " + line
    route = routes[words[1]]
    if words[0] == "delay" and len(words) == 3:
        route.delay = float(words[2]) / 1000
    elif words[0] == "loss" and len(words) == 3:
        route.loss = float(words[2])
    elif words[0] == "cut":
        route.stats["cuts"] += 1
        for connection in list(route.connections):
            for writer in connection:
                writer.transport.abort()
    else:
        return "error: unknown command " + line
    return "ok"


async def main(arguments):
    seed = int(time.time())
    if arguments[:1] == ["--seed"]:
        seed = int(arguments[1])
        arguments = arguments[2:]
    random.seed(seed)
    routes = {}
    for text in arguments:
        name, rest = text.split("=", 1)
        listen_side, target_side = rest.split("->", 1)
        routes[name] = Route(name, endpoint(listen_side), endpoint(target_side))
    servers = []
    ports = []
    for route in routes.values():
        sock = listen(route)
        ports.append("%s=%d" % (route.name, sock.getsockname()[1]))
        servers.append(await asyncio.start_server(lambda r, w, route=route: serve(route, r, w), sock=sock))
    print(" ".join(["ready", "seed=%d" % seed] + ports), flush=True)
    loop = asyncio.get_running_loop()
    stdin = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
    while True:
        line = await stdin.readline()
        if not line:
            break
        print(command(routes, line.decode().strip()), flush=True)
    for server in servers:
        server.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
