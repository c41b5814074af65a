/// Who the app acts for: the user id and a bearer token (a JWT the application's back end
/// issued, whose subject is ``uid``). The REST API's URLs carry the uid; the server checks that
/// the token is for it.
public struct Credentials: Sendable {
    /// The user id: the token's subject (`sub`, or its `uid` claim).
    public var uid: String
    /// The bearer token. Never printed by this library.
    public var token: String

    /// The user id and the bearer token of the signed-in user.
    public init(uid: String, token: String) {
        self.uid = uid
        self.token = token
    }
}

extension Credentials: CustomStringConvertible {
    /// The uid only: the token is a secret.
    public var description: String { "Credentials(uid: \(Bounded.quoted(uid)), token: <hidden>)" }
}

/// The app's source of credentials, called before each request. `forceRefresh` is `true`
/// after the server refused the last token (401): return a fresh one (as Firebase's
/// `getIDTokenForcingRefresh(true)` does). Throw when no user is signed in.
public typealias CredentialsProvider = @Sendable (_ forceRefresh: Bool) async throws -> Credentials
