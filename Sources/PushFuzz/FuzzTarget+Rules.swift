import PushCore
import PushJSON
import PushMatching

extension FuzzTarget {
    /// `rules`: read rules parsed and evaluated (SPEC §12, PushMatching's `ReadRules`).
    ///
    /// The input is a rules document (`{"rules": …}`), then optionally a NUL byte and a query
    /// `{"path": …, "uid": …, "token": …, "data": …, "now": …}`. Without a query the rules
    /// are evaluated at the root and at paths made of the document's own keys (`$x` as `x`),
    /// for no one, for `u1`, and for `u1` with claims, over a small tree.
    ///
    /// - A refused document: a message that is non-empty and bounded.
    /// - An evaluation never traps, and gives the same answer twice; it is allowed exactly when
    ///   a rule granted it; a failed rule's message is bounded.
    /// - A grant covers the subtree: allowed at P ⇒ allowed at a child of P.
    public static func rules(_ data: UnsafeBufferPointer<UInt8>) throws(FuzzViolation) {
        var input = FuzzInput(data)
        let documentBytes = input.part(until: 0)
        guard let document = try? JSONParser.parse(documentBytes) else { return }
        let rules: ReadRules
        do {
            rules = try ReadRules.parse(document)
        } catch {
            try Check.message(error.description, "a rules document's error")
            return
        }
        let query = try? JSONParser.parse(input.rest)
        var tree = DataTree(root: rulesDefaultTree)
        if let data = query?["data"], let write = try? TreeWrite.put(at: .root, data: data) {
            tree = DataTree().applying(write)
        }
        let now = query?["now"]?.integerValue ?? 1_700_000_000_000
        var auths: [JSON?] = [nil, ReadRules.auth(uid: "u1", claims: nil), ReadRules.auth(uid: "u1", claims: ["admin": true, "email_verified": true])]
        if let query, query["uid"] != nil || query["token"] != nil {
            auths = [ReadRules.auth(uid: query["uid"]?.stringValue ?? "u1", claims: query["token"])]
        }
        var paths: [Path] = [.root]
        if let text = query?["path"]?.stringValue, let path = try? Path(text) {
            paths = [path]
        } else {
            collectPaths(document["rules"], into: &paths, prefix: [])
        }
        for path in paths {
            for auth in auths {
                let decision = rules.evaluate(path: path, auth: auth, tree: tree, now: now)
                try Check.that(decision.allowed == (decision.grantedBy != nil), "allowed \(decision.allowed) but granted by \(decision.grantedBy ?? "nothing") at \(Check.excerpt(path.string))")
                for step in decision.trace {
                    if case .failed(let message) = step.outcome { try Check.message(message, "a failed rule's message") }
                }
                let again = rules.evaluate(path: path, auth: auth, tree: tree, now: now)
                try Check.that(again == decision, "two evaluations at \(Check.excerpt(path.string)) differ")
                if decision.allowed {
                    let child = Path(uncheckedKeys: path.keys + [Key("fuzz-child")])
                    let below = rules.evaluate(path: child, auth: auth, tree: tree, now: now)
                    try Check.that(below.allowed, "allowed at \(Check.excerpt(path.string)) (by \(decision.grantedBy ?? "")) but not below it")
                }
            }
        }
    }

    /// The tree rules are evaluated over when the query gives none.
    static let rulesDefaultTree: JSON = [
        "users": ["u1": ["admin": true, "name": "Ann", "age": 42]],
        "rooms": ["x": ["members": ["u1": true], "public": false, "created": 1_600_000_000_000]],
    ]

    /// Paths made of the document's keys, `$name` read as the key `x`: at most 16.
    static func collectPaths(_ node: JSON?, into paths: inout [Path], prefix: [Key]) {
        guard case .object(let object)? = node, prefix.count < 8 else { return }
        for (key, child) in object where !key.string.hasPrefix(".") {
            guard paths.count < 16 else { return }
            let next = key.string.hasPrefix("$") ? Key("x") : key
            guard (try? Path.validateKey(next)) != nil else { continue }
            let keys = prefix + [next]
            paths.append(Path(uncheckedKeys: keys))
            collectPaths(child, into: &paths, prefix: keys)
        }
    }
}
