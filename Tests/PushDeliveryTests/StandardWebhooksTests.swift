import Foundation
import Logging
import PushCore
@testable import PushDelivery
import PushHTTP
import PushJOSE
import PushStore
import PushFakes
import PushTestSupport
import Synchronization
import Testing

@Suite("Webhook signatures against the Standard Webhooks library", .processLevel)
struct StandardWebhooksTests {
    @Test("a webhook the service sent verifies with the standardwebhooks Python package")
    func pythonVerifies() async throws {
        let h = try await DeliveryHarness()
        defer { Task { await h.close() } }
        let hook = try await h.subscribe(.webhook, token: "ctx", path: "/w", mode: .childEvent)
        h.start()
        try await h.queue(hook, .childEvent, payload: #"{"app":"toto","uid":"u1","path":"/w","event":{"t":"child","é":"\/ü"}}"#)
        try await h.eventually("delivered") { h.sends("webhook").count == 1 }
        let received = h.sends("webhook")[0]
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-whsec-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data(received.data).write(to: folder.appendingPathComponent("body"))
        let script = """
            import sys
            from standardwebhooks.webhooks import Webhook
            body = open(sys.argv[1], "rb").read().decode("utf-8")
            headers = {"webhook-id": sys.argv[2], "webhook-timestamp": sys.argv[3], "webhook-signature": sys.argv[4]}
            Webhook(sys.argv[5]).verify(body, headers)
            print("verified")
            """
        try PythonPackages.require("standardwebhooks")
        let process = TestProcesses.make(
            command: "python3",
            [
                "-c", script, folder.appendingPathComponent("body").path, received.headers["webhook-id"] ?? "",
                received.headers["webhook-timestamp"] ?? "", received.headers["webhook-signature"] ?? "", DeliveryHarness.webhookSecret,
            ])
        let text = try TestProcesses.output(process)
        #expect(process.terminationStatus == 0 && text.contains("verified"), "standardwebhooks says: \(text)")
    }
}
