import PushCore
import PushJSON

/// An application's read rules (SPEC §12), in the format of the Firebase Realtime Database rules
/// (`{"rules": {…}}`): who may read — and so subscribe to — which node.
///
/// Only `.read` is evaluated; `.write`, `.validate` and `.indexOn` are accepted and ignored.
/// Reading the node at P is allowed when some `.read` on the way from the root to P (both
/// included) is true; a grant covers the whole subtree, and rules are not filters (grants on
/// some children of P do not allow P). A key `$name` matches any one key and binds `$name` to
/// it; a literal key of the same level is matched first.
public struct ReadRules: Sendable {
    /// A `.read` value.
    enum Rule: Sendable {
        case constant(Bool)
        case expression(RuleExpression, text: String)

        var readsData: Bool {
            if case .expression(let expression, _) = self { return expression.readsData }
            return false
        }

        var readsNow: Bool {
            if case .expression(let expression, _) = self { return expression.readsNow }
            return false
        }
    }

    /// One level of the rules, and what is below it.
    final class Node: Sendable {
        /// Where it is in the rules file (`rules/rooms/$room`).
        let location: String
        let read: Rule?
        let children: [Key: Node]
        let wildcard: (name: String, node: Node)?

        init(location: String, read: Rule?, children: [Key: Node], wildcard: (name: String, node: Node)?) {
            self.location = location
            self.read = read
            self.children = children
            self.wildcard = wildcard
        }

        var readsData: Bool {
            (read?.readsData ?? false) || children.values.contains(where: \.readsData) || (wildcard?.node.readsData ?? false)
        }

        var readsNow: Bool {
            (read?.readsNow ?? false) || children.values.contains(where: \.readsNow) || (wildcard?.node.readsNow ?? false)
        }
    }

    let root: Node
    /// Whether some rule reads the data tree (`root` or `data`): only then can a write change an
    /// answer, and only then are evaluations tracked after writes.
    public let readsData: Bool
    /// Whether some rule uses `now`: its answer can change with time alone, so every
    /// subscription under these rules is evaluated again at each record it would receive (as
    /// Firebase checks at every read; issue 33: a deadline in a rule used to stop new
    /// subscriptions only, while existing ones kept receiving until a restart).
    public let readsNow: Bool
    /// Whether an answer can change after the subscription was admitted (a write, or time):
    /// evaluations are then tracked and checked again.
    public var rechecked: Bool { readsData || readsNow }

    init(root: Node) {
        self.root = root
        self.readsData = root.readsData
        self.readsNow = root.readsNow
    }

    /// A key of the rules file as a message shows it: whole up to ``JSONWriter/excerptBytes``,
    /// else cut and followed by its length (a message never echoes a huge key; found by the
    /// rules fuzzer, issue 33).
    static func excerpt(_ name: String) -> String {
        let length = name.utf8.count
        guard length > JSONWriter.excerptBytes else { return name }
        return String(decoding: JSONWriter.utf8Prefix(name.utf8, maxBytes: JSONWriter.excerptBytes), as: UTF8.self) + "… (\(length) bytes)"
    }

    /// The rules of an application that configures none: every authenticated client may read
    /// everything (SPEC §12).
    public static let authenticated: ReadRules = {
        let expression = try! RuleExpressionParser.parse("auth != null", rule: "rules/.read", captured: [])
        return ReadRules(root: Node(location: "rules", read: .expression(expression, text: "auth != null"), children: [:], wildcard: nil))
    }()

    /// Longest rules nesting.
    public static let maxDepth = 64

    /// Reads a rules document: `{"rules": {…}}`. Throws with the rule's location (and column)
    /// when a rule does not parse or uses what SPEC §12 leaves out.
    public static func parse(_ document: JSON) throws(RulesError) -> ReadRules {
        guard case .object(let top) = document else { throw RulesError(rule: "(the document)", "expected an object {\"rules\": {…}}") }
        for (key, _) in top where key.string != "rules" {
            throw RulesError(rule: key.string, "unknown top-level key; a rules document holds only \"rules\"")
        }
        guard let rules = top[Key("rules")] else { throw RulesError(rule: "(the document)", "missing \"rules\"") }
        return ReadRules(root: try node(rules, location: "rules", captured: [], depth: 0))
    }

    static func node(_ value: JSON, location: String, captured: Set<String>, depth: Int) throws(RulesError) -> Node {
        guard depth <= maxDepth else { throw RulesError(rule: location, "the rules nest more than \(maxDepth) levels") }
        guard case .object(let object) = value else {
            throw RulesError(rule: location, "expected an object of rules and child keys, found \(kind(value))")
        }
        var read: Rule?
        var children: [Key: Node] = [:]
        var wildcard: (name: String, node: Node)?
        for (key, child) in object {
            let name = key.string
            let childLocation = location + "/" + name
            if name.hasPrefix(".") {
                switch name {
                case ".read":
                    switch child {
                    case .bool(let flag): read = .constant(flag)
                    case .string(let text):
                        read = .expression(try RuleExpressionParser.parse(text, rule: childLocation, captured: captured), text: text)
                    default:
                        throw RulesError(rule: childLocation, "expected true, false or an expression string, found \(kind(child))")
                    }
                case ".write", ".validate", ".indexOn":
                    continue  // accepted, not evaluated: the service only reads
                default:
                    throw RulesError(rule: childLocation, "unknown rule \(Self.excerpt(name)); read rules know .read (and accept .write, .validate, .indexOn)")
                }
            } else if name.hasPrefix("$") {
                let variable = name.dropFirst()
                guard !variable.isEmpty, variable.unicodeScalars.allSatisfy(RuleExpressionParser.isIdentifierPart) else {
                    throw RulesError(rule: childLocation, "a $ variable is $ then letters, digits or _")
                }
                if let existing = wildcard {
                    throw RulesError(rule: childLocation, "a second $ key at this level (\(existing.name) already matches any key)")
                }
                guard !captured.contains(name) else { throw RulesError(rule: childLocation, "\(Self.excerpt(name)) is captured already on the way here") }
                wildcard = (name, try node(child, location: childLocation, captured: captured.union([name]), depth: depth + 1))
            } else {
                do {
                    try Path.validateKey(key)
                } catch {
                    throw RulesError(rule: childLocation, "not a valid key: \(error)")
                }
                children[key] = try node(child, location: childLocation, captured: captured, depth: depth + 1)
            }
        }
        return Node(location: location, read: read, children: children, wildcard: wildcard)
    }

    static func kind(_ value: JSON) -> String {
        switch value {
        case .null: "null"
        case .bool: "a boolean"
        case .int, .double: "a number"
        case .string: "a string"
        case .array: "a list"
        case .object: "an object"
        }
    }

    /// The `auth` of a rule for a subscriber: `{"uid": uid, "token": claims}` (the token's
    /// verified claims; without them, `{"uid": uid}` alone).
    public static func auth(uid: String, claims: JSON?) -> JSON {
        var members: [(Key, JSON)] = [("uid", .string(uid))]
        if let claims { members.append(("token", claims)) }
        return .object(JSONObject(members))
    }

    /// Whether `auth` may read the node at `path` of `tree` at time `now` (milliseconds since
    /// the epoch), with the paths the evaluation read.
    public func evaluate(path: Path, auth: JSON?, tree: DataTree, now: Int64) -> AccessDecision {
        var evaluator = RuleEvaluator(tree: tree, auth: auth, now: now)
        var decision = AccessDecision(allowed: false)
        var node: Node? = root
        var bindings: [String: String] = [:]
        var keys = path.keys[...]
        var current = Path.root
        while let level = node {
            if let read = level.read {
                let location = level.location + "/.read"
                switch read {
                case .constant(let flag):
                    decision.trace.append(RuleTrace(rule: location, path: current, outcome: flag ? .granted : .denied))
                    if flag {
                        decision.allowed = true
                        decision.grantedBy = location
                    }
                case .expression(let expression, _):
                    do throws(RuleFailure) {
                        let granted = try evaluator.grants(expression, data: current, bindings: bindings)
                        decision.trace.append(RuleTrace(rule: location, path: current, outcome: granted ? .granted : .denied))
                        if granted {
                            decision.allowed = true
                            decision.grantedBy = location
                        }
                    } catch {
                        decision.trace.append(RuleTrace(rule: location, path: current, outcome: .failed(error.message)))
                    }
                }
                if decision.allowed { break }
            }
            guard let key = keys.popFirst() else { break }
            current = current.appending([key])
            if let child = level.children[key] {
                node = child
            } else if let wildcard = level.wildcard {
                bindings[wildcard.name] = key.string
                node = wildcard.node
            } else {
                node = nil  // no rule below: nothing deeper can grant
            }
        }
        decision.reads = evaluator.reads.sorted { lexicographicCompareUTF8($0.string, $1.string) < 0 }
        return decision
    }
}

/// Whether a subscriber may read a node (SPEC §12), and what the answer depends on.
public struct AccessDecision: Sendable, Equatable {
    public var allowed: Bool
    /// The paths whose data the evaluation read: a write at, above or below one of them may
    /// change the answer.
    public var reads: [Path] = []
    /// The rule that granted, when allowed (`rules/users/$uid/.read`).
    public var grantedBy: String?
    /// Every rule evaluated on the way, in order.
    public var trace: [RuleTrace] = []

    public init(allowed: Bool) {
        self.allowed = allowed
    }
}

/// One rule evaluated on the way to a node.
public struct RuleTrace: Sendable, Equatable {
    public enum Outcome: Sendable, Equatable {
        case granted
        case denied
        /// The evaluation failed (a method on null, a type mismatch…): the rule is false.
        case failed(String)
    }

    public var rule: String
    /// The node whose `data` it saw.
    public var path: Path
    public var outcome: Outcome
}
