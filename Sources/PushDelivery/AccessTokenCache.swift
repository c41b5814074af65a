import PushCore
import Synchronization

/// An OAuth access token shared by every send of one application and provider: fetched once,
/// reused until shortly before it expires, refreshed once for all the sends waiting on it.
///
/// When a provider refuses the token, each send that saw the refusal calls
/// ``invalidate(generation:)`` with the generation it used: only the first invalidation of a
/// generation counts, so concurrent refusals lead to one refresh, which they all await.
public actor AccessTokenCache {
    public typealias Fetch = @Sendable () async throws(AnswerClassifier.OAuthFailure) -> AnswerClassifier.AccessToken

    public struct Token: Sendable, Equatable {
        public var value: String
        /// Which fetch it came from.
        public var generation: Int
    }

    let fetch: Fetch
    let clock: any ServiceClock
    /// Refresh this long (milliseconds) before expiry: google-auth refreshes 3 min 45 s ahead,
    /// HMS's demo 5 min; tokens live an hour.
    let margin: Int64
    var current: (token: Token, expiresAt: Int64)? {
        didSet { published.withLock { $0 = current } }
    }
    /// ``current`` for readers outside the actor (``cachedToken()``).
    nonisolated let published = Mutex<(token: Token, expiresAt: Int64)?>(nil)
    var refreshing: Task<Token, any Error>?
    var generation = 0
    /// What the last fetches gave, for the operations overview (``health``).
    nonisolated let history = Mutex(FetchHistory())

    /// The last token fetched and the last fetch that failed (milliseconds since the epoch).
    public struct FetchHistory: Sendable, Equatable {
        public var fetchedAt: Int64?
        /// When the token fetched expires (the provider's `expires_in`), and when it is
        /// refreshed (``margin`` before).
        public var expiresAt: Int64?
        public var refreshAt: Int64?
        public var failedAt: Int64?
        /// The provider's answer or the transport's error, never the credentials.
        public var failure: String?
    }

    /// The last fetches, without waiting for the actor.
    public nonisolated var fetches: FetchHistory { history.withLock { $0 } }

    public init(margin: Int64 = 300_000, clock: any ServiceClock, fetch: @escaping Fetch) {
        self.fetch = fetch
        self.clock = clock
        self.margin = margin
    }

    /// The valid token held now, if any, without waiting for the actor: a send that finds none
    /// goes through ``token()``.
    public nonisolated func cachedToken() -> Token? {
        guard let held = published.withLock({ $0 }), clock.now < held.expiresAt else { return nil }
        return held.token
    }

    /// A valid token, fetching one if there is none (or it is about to expire).
    public func token() async throws(AnswerClassifier.OAuthFailure) -> Token {
        if let current, clock.now < current.expiresAt { return current.token }
        let task: Task<Token, any Error>
        if let refreshing {
            task = refreshing
        } else {
            task = Task { try await self.refresh() }
            refreshing = task
        }
        do {
            return try await task.value
        } catch let failure as AnswerClassifier.OAuthFailure {
            throw failure
        } catch {
            throw .retry(reason: "token fetch: \(error)", retryAfter: nil)
        }
    }

    func refresh() async throws -> Token {
        defer { refreshing = nil }
        let fetched: AnswerClassifier.AccessToken
        do {
            fetched = try await fetch()
        } catch {
            let reason: String
            switch error {
            case .credentials(let text): reason = "refused: " + text
            case .retry(let text, _): reason = text
            }
            let now = clock.now
            history.withLock {
                $0.failedAt = now
                $0.failure = String(reason.prefix(300))
            }
            throw error
        }
        generation += 1
        let token = Token(value: fetched.token, generation: generation)
        // A token that lives less than the margin is used for half its life.
        let now = clock.now
        let life = fetched.expiresIn.saturatingMultiplying(1_000)
        let usable = life > 2 * margin ? life - margin : life / 2
        current = (token, now.saturatingAdding(usable))
        history.withLock {
            $0.fetchedAt = now
            $0.expiresAt = now.saturatingAdding(life)
            $0.refreshAt = now.saturatingAdding(usable)
        }
        return token
    }

    /// Forgets the token of `generation` (a provider refused it); a later generation is kept.
    public func invalidate(generation: Int) {
        if let current, current.token.generation == generation { self.current = nil }
    }
}
