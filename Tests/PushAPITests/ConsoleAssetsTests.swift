import Foundation
@testable import PushAPI
import Testing

@Suite("The console's files")
struct ConsoleAssetsTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test("the copy compiled into the service is console/ as committed (run scripts/embed-console.py after editing)")
    func embedded() throws {
        for (file, embedded) in [("index.html", ConsoleAssets.indexHTML), ("app.css", ConsoleAssets.appCSS), ("app.js", ConsoleAssets.appJS)] {
            var text = try String(contentsOf: Self.root.appendingPathComponent("console/\(file)"), encoding: .utf8)
            while text.hasSuffix("\n") { text.removeLast() }
            #expect(text == embedded, "console/\(file) differs from ConsoleAssets: run scripts/embed-console.py")
        }
    }

    @Test("nothing from another origin, no inline script or style, no HTML from data")
    func selfContained() {
        let page = ConsoleAssets.indexHTML
        #expect(!page.contains("http://") && !page.contains("https://"), "no asset from another origin")
        #expect(!page.contains("<script>") && !page.contains(" style=") && !page.contains("<style"), "no inline script or style (the CSP refuses them)")
        #expect(!ConsoleAssets.appJS.contains("innerHTML") && !ConsoleAssets.appJS.contains("insertAdjacentHTML"), "text only: nothing the service returns is parsed as HTML")
        #expect(!ConsoleAssets.appJS.contains("eval(") && !ConsoleAssets.appJS.contains("new Function"))
        #expect(!ConsoleAssets.appCSS.contains("@import") && !ConsoleAssets.appCSS.contains("url("))
    }
}
