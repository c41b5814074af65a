#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (Fuzz/corpus/<target>/) from the repository's
fixtures and from examples the tests use. Run from anywhere; rewrites the folders it fills.
Tokens are made with joserfc (`pip install joserfc`, which CI installs) from the test key set."""
import hashlib
import json
import os
import shutil
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "Fuzz", "corpus")


def read(path):
    with open(os.path.join(ROOT, path), "rb") as f:
        return f.read()


def write(target, name, data):
    if isinstance(data, str):
        data = data.encode()
    folder = os.path.join(CORPUS, target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def compact(value):
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def json_seeds():
    for path in ["fixtures/providers/fcm-invalid-token.json", "fixtures/providers/hms-partial.json", "fixtures/jose/rfc7515-a1-hs256.json",
                 "fixtures/demo/rules.json", "fixtures/config/toto-rules.json"]:
        write("json", os.path.basename(path), read(path))
    texts = {
        "numbers": "[0,-0,1,-1,9223372036854775807,-9223372036854775808,9223372036854775808,1.5,-0.0,1e308,2.2250738585072014e-308,4.9e-324,1E+2,0.1,123456789012345678901234567890,1e-400]",
        "strings": r'["", "a\"b\\c\/d", "\b\f\n\r\t", "\u0000\u001f", "\u00e9\u20ac", "\ud83d\ude00", "é€😀"]',
        "keys": '{"b":1,"a":2,"10":3,"2":4,"-1":5,"01":6,"a":7}',
        "nested": '{"a":[{"b":[[],{}]},null,true,false],"c":{"d":{"e":"f"}}}',
        "scalars-true": "true", "scalars-null": " null ", "scalar-string": '"x"', "scalar-number": "-12.5e-3",
        "whitespace": ' \t\n\r[ 1 , 2 ]\n',
        "deep": "[" * 40 + "]" * 40,
    }
    for name, text in texts.items():
        write("json", name, text)


def record_seeds():
    changes = read("fixtures/demo/changes.ndjson").decode().splitlines()
    write("record", "demo-changes", "\n".join(changes) + "\n")
    socket = read("fixtures/demo/socket.ndjson").decode().splitlines()
    for index, line in enumerate(socket[:6]):
        write("record", f"socket-{index}", line[:600] + ("\n" if index % 2 == 0 else ""))
    lines = {
        "revoke-path-uid": '{"seq":3,"app":"toto","op":"revoke","path":"/users/bob","uid":"u42","reason":"permission_denied"}',
        "revoke-app": '{"seq":4,"app":"toto","op":"revoke","reason":"disabled"}',
        "put-null": '{"seq":5,"app":"toto","op":"put","path":"/a/b","data":null,"ts":1700000000000}',
        "patch-nested": '{"seq":6,"app":"toto","op":"patch","path":"/","data":{"a/b":1,"c":{"d":[1,2]},"e":null}}',
        "unknown-field": '{"seq":7,"app":"toto","op":"put","path":"/x","data":1,"extra":{"y":2}}',
        "bad-op": '{"seq":1,"app":"toto","op":"delete","path":"/x","data":1}',
        "seq-double": '{"seq":1.5,"app":"toto","op":"put","path":"/x","data":1}',
        "resend": '{"seq":9,"app":"toto","op":"put","path":"/x","data":1}\n{"seq":9,"app":"toto","op":"put","path":"/x","data":2}\n{"seq":8,"app":"toto","op":"put","path":"/x","data":3}\n',
        "mixed": 'not json\n\n{"seq":10,"app":"toto","op":"put","path":"/k","data":{"x":true}}\n[1]\n',
    }
    for name, text in lines.items():
        write("record", name, text)


def rules_seeds():
    write("rules", "demo-rules", read("fixtures/demo/rules.json"))
    write("rules", "toto-rules", read("fixtures/config/toto-rules.json"))
    documents = [
        '{"rules":{"foo":{".read":true,"bar":{".read":false}}}}',
        '{"rules":{"users":{"public":{".read":true},"$uid":{".read":"auth.uid == $uid"}}}}',
        '{"rules":{"rooms":{"$room":{"topic":{".read":"data.parent().child(\'members\').hasChild(auth.uid)"}}}}}',
        '{"rules":{"users":{"$uid":{".read":"data.child(\'visibility\').val() == \'public\' || auth.uid == $uid"}}}}',
        '{"rules":{"inbox":{".read":"root.child(\'allowed\').child(auth.token.email.replace(\'.\', \',\')).exists()"}}}',
        '{"rules":{".read":"auth.token.email_verified == true && auth.token.email.toLowerCase().endsWith(\'@example.com\')"}}',
        '{"rules":{".read":"root.child(\'s\').isString() && root.child(\'n\').isNumber() && root.child(\'b\').isBoolean() && !root.child(\'s\').isNumber()"}}',
        '{"rules":{".read":"(2 + 3 * 4) % 5 == 4 ? \'a\' + 1 == \'a1\' : false"}}',
        '{"rules":{"$key":{".read":"$key.beginsWith(\'pub_\') && $key.length > 4"}}}',
        '{"rules":{"$item":{".read":"data.hasChildren([\'name\', \'age\'])"}}}',
        '{"rules":{"offers":{"$id":{".read":"data.child(\'expires\').val() > now"}}}}',
        '{"rules":{".read":"root.child(\'nothing\').val().length > 2"}}',
        '{"rules":{"a":{".read":"auth != null &&"}}}',
        '{"rules":{"a":{".write":true,".validate":"x",".indexOn":["a"]},"b":{"$x":{"$y":{".read":true}}}}}',
    ]
    for index, document in enumerate(documents):
        write("rules", f"rules-{index:02}", document)
    queries = [
        ('{"rules":{"users":{"$uid":{".read":"auth.uid == $uid"}}}}', {"path": "/users/u1/inbox", "uid": "u1"}),
        ('{"rules":{"rooms":{"$room":{".read":"root.child(\'rooms\').child($room).child(\'members\').hasChild(auth.uid)"}}}}',
         {"path": "/rooms/x", "uid": "u1", "data": {"rooms": {"x": {"members": {"u1": True}}}}}),
        ('{"rules":{"offers":{"$id":{".read":"data.child(\'expires\').val() > now"}}}}',
         {"path": "/offers/o1", "now": 5, "data": {"offers": {"o1": {"expires": 10}}}}),
        ('{"rules":{".read":"auth.token.admin === true"}}', {"path": "/", "token": {"admin": True}}),
    ]
    for index, (document, query) in enumerate(queries):
        write("rules", f"query-{index}", document + "\0" + compact(query))


def jose_seeds():
    from joserfc import jwe, jws
    from joserfc.jwk import KeySet

    keyset = json.loads(read("fixtures/jose/test-keyset.json"))
    keys = KeySet.import_key_set(keyset)
    by_kid = {key["kid"]: key for key in keyset["keys"]}
    for kid in ["sig-es", "sig-hs", "sig-ed", "enc-kw", "dev-ec", "dev-rsa"]:
        write("jose", f"jwk-{kid}", b"\x00" + compact(by_kid[kid]).encode())
    public_ec = {k: v for k, v in by_kid["sig-es"].items() if k != "d"}
    write("jose", "jwk-public-ec", b"\x00" + compact(public_ec).encode())
    write("jose", "jwkset", b"\x01" + compact({"keys": [by_kid["sig-es"], by_kid["enc-dir"]]}).encode())
    payload = b'{"ver":"v2","path":"/users/alice","event":"value","data":{"x":1}}'
    for alg, kid in [("ES256", "sig-es"), ("HS256", "sig-hs"), ("EdDSA", "sig-ed")]:
        token = jws.serialize_compact({"alg": alg, "kid": kid}, payload, keys.get_by_kid(kid), algorithms=[alg])
        write("jose", f"jws-{alg}", b"\x02" + token.encode())
    for alg, enc, kid in [("dir", "A256GCM", "enc-dir"), ("A128KW", "A128GCM", "enc-kw128"), ("ECDH-ES", "A256GCM", "dev-ec"),
                          ("ECDH-ES+A256KW", "A128GCM", "dev-ec"), ("RSA-OAEP-256", "A256GCM", "dev-rsa")]:
        token = jwe.encrypt_compact({"alg": alg, "enc": enc, "kid": kid}, payload, keys.get_by_kid(kid), algorithms=[alg, enc])
        write("jose", f"jwe-{alg}", b"\x02" + token.encode())
    signed = jws.serialize_compact({"alg": "ES256", "kid": "sig-es"}, payload, keys.get_by_kid("sig-es"), algorithms=["ES256"])
    write("jose", "payload-v2", b"\x02" + compact({"ver": "v2", "srv": "pushdispatch", "evt": signed}).encode())
    write("jose", "sign", b"\x03\x00" + payload)
    write("jose", "encrypt", b"\x04\x05" + payload)


def bearer_seeds():
    from joserfc import jws
    from joserfc.jwk import KeySet

    keys = KeySet.import_key_set(json.loads(read("fixtures/jose/test-keyset.json")))
    claims = {"sub": "alice", "exp": 1_700_003_600, "iss": "https://issuer.example", "aud": "pushdispatch"}
    variants = {
        "valid": claims,
        "uid": {**{k: v for k, v in claims.items() if k != "sub"}, "uid": "bob", "aud": ["x", "pushdispatch"]},
        "expired": {**claims, "exp": 1_600_000_000},
        "nbf-future": {**claims, "nbf": 1_800_000_000},
        "wrong-aud": {**claims, "aud": "other"},
        "exp-double": {**claims, "exp": 1.7e9 + 0.5, "admin": True},
    }
    for name, value in variants.items():
        for alg, kid in [("HS256", "sig-hs"), ("ES256", "sig-es")]:
            token = jws.serialize_compact({"alg": alg, "kid": kid}, compact(value).encode(), keys.get_by_kid(kid), algorithms=[alg])
            write("bearer", f"token-{name}-{alg}", b"\x00" + token.encode())
    write("bearer", "claims-valid", b"\x01\x00" + compact(claims).encode())
    write("bearer", "claims-no-sub", b"\x01\x01" + compact({"exp": 1_700_003_600, "iss": "https://issuer.example", "aud": "pushdispatch"}).encode())
    write("bearer", "none-alg", b"\x00eyJhbGciOiJub25lIn0.eyJzdWIiOiJhIn0.")


def subscription_seeds():
    documents = json.loads(read("fixtures/demo/subscriptions.json"))
    keyset = json.loads(read("fixtures/jose/test-keyset.json"))
    dev = next(k for k in keyset["keys"] if k["kid"] == "dev-ec")
    device_key = {"kty": "EC", "crv": "P-256", "x": dev["x"], "y": dev["y"]}
    for entry in documents:
        doc = dict(entry["doc"])
        if doc.get("encryption") == "DEVICE-KEY":
            doc["encryption"] = {"alg": "ECDH-ES", "enc": "A256GCM", "jwk": device_key}
        write("subscription", entry["name"], compact(doc))
    write("subscription", "symmetric", compact({"kind": "webhook", "destination": "orders", "path": "/orders", "mode": "childEvent",
                                                "encryption": {"alg": "dir", "enc": "A256GCM", "kid": "enc-dir"}, "expirationTimestampSeconds": 1700086400}))
    write("subscription", "readback", compact({"kind": "mobile", "path": "/a", "context": "tok", "id": "x", "uid": "u1", "app": "toto", "createdAt": 1}))


def webpush_seeds():
    keyset = json.loads(read("fixtures/jose/test-keyset.json"))
    dev = next(k for k in keyset["keys"] if k["kid"] == "dev-ec")
    import base64
    def b64(data):
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()
    def unb64(text):
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    p256dh = b64(b"\x04" + unb64(dev["x"]) + unb64(dev["y"]))
    auth = b64(bytes(range(16)))
    for index, endpoint in enumerate(["https://fcm.googleapis.com/fcm/send/abc:APA91b", "https://updates.push.services.mozilla.com/wpush/v2/gAAAA",
                                      "https://web.push.apple.com/QGuQyavXut", "https://[2001:db8::1]:8443/p?x=1", "https://H.EXAMPLE:0443/x",
                                      "https://127.0.0.1/p", "http://push.example/x"]):
        context = {"endpoint": endpoint, "expirationTime": None, "keys": {"p256dh": p256dh, "auth": auth}}
        write("webpush", f"context-{index}", b"\x00" + compact(context).encode())
        if index < 3:
            write("webpush", f"stored-{index}", b"\x01" + compact({"endpoint": endpoint, "keys": {"auth": auth, "p256dh": p256dh}}).encode())
    write("webpush", "as-text", b"\x00" + compact(compact({"endpoint": "https://p.example/1", "keys": {"p256dh": p256dh, "auth": auth}})).encode())


def provider_seeds():
    answers = json.loads(read("fixtures/providers/answers.json"))
    kinds = {"fcm": 0, "hms": 1, "apns": 2, "webpush": 3, "google": 5}
    for name in sorted(answers):
        prefix = name.split("-")[0]
        if prefix not in kinds:
            continue
        # A few of each provider, all their distinct bodies: the corpus stays small.
        if prefix in ("apns", "webpush") and hashlib.sha1(name.encode()).digest()[0] % 2:
            continue
        status = answers[name]["status"]
        retry = answers[name].get("retryAfter")
        header = bytes([kinds[prefix], status >> 8, status & 0xFF])
        header += bytes([255]) if retry is None else bytes([len(str(retry))]) + str(retry).encode()
        write("provider", name, header + read(f"fixtures/providers/{name}.json"))
    write("provider", "webhook-429-date", bytes([4, 1, 429 & 0xFF]) + bytes([29]) + b"Sun, 06 Nov 1994 08:49:37 GMT"[:29])
    write("provider", "webhook-410", bytes([4, 1, 410 & 0xFF, 255]))
    write("provider", "hms-token", bytes([5, 0, 200, 3]) + b"120" + read("fixtures/providers/hms-token.json"))
    write("provider", "asctime", bytes([3, 1, 247, 24]) + b"Sun Nov  6 08:49:37 1994")


def config_seeds():
    for name in ["sample.yaml", "demo.yaml"]:
        write("config", name, read(f"fixtures/config/{name}"))
    write("config", "json.json", compact({"store": {"sqlite": "./x.db"}, "http": {"port": 8080},
                                           "apps": {"toto": {"auth": {"hs256Secret": "inline-secret-of-at-least-thirty-two-bytes!"}}}}))
    write("config", "problems.yaml", "store:\n  sqlite: ./x.db\n  postgres: postgres://u:hunter2-password@db/x\nhttp:\n  port: 99999\n  colour: blue\napps:\n  t:\n    auth: {hs256Secret: short-secret-value}\n")
    write("config", "webhooks.yaml", "apps:\n  toto:\n    auth: {hs256Secret: env:TOTO_AUTH_SECRET}\n    webhooks:\n      orders: {url: \"https://example.com/hooks\", secret: inline-webhook-secret-123}\n    subscriptions: {defaultLifetime: 7d, maxLifetime: 30d}\n")


def main():
    targets = {"json": json_seeds, "record": record_seeds, "rules": rules_seeds, "jose": jose_seeds, "bearer": bearer_seeds,
               "subscription": subscription_seeds, "webpush": webpush_seeds, "provider": provider_seeds, "config": config_seeds}
    chosen = sys.argv[1:] or list(targets)
    for name in chosen:
        shutil.rmtree(os.path.join(CORPUS, name), ignore_errors=True)
        targets[name]()
        print(name, len(os.listdir(os.path.join(CORPUS, name))))


if __name__ == "__main__":
    main()
