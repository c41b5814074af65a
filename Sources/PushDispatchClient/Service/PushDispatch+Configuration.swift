import Foundation
import PushJOSE

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension PushDispatch {
    /// What a ``PushDispatch`` needs: where the service is, which application, who the user
    /// is, and which device this is. Every other field has a documented default.
    public struct Configuration: Sendable {
        /// The service's base URL, such as `https://push.example.com` (a path prefix is kept).
        /// `http://` is accepted only for a loopback host (`localhost`, `127.0.0.1`, `::1`):
        /// the application's public keys are fetched from here.
        public var baseURL: URL
        /// The application id.
        public var app: String
        /// The signed-in user's credentials.
        public var credentials: CredentialsProvider
        /// This device's push token; `nil` until the provider gave one (webhook subscriptions
        /// and reading notifications need none).
        public var deviceToken: DeviceToken?
        /// Where the device's private key lives. Default: ``FileDeviceKeyStore/standard(app:)``, a
        /// file readable by its owner only. On Apple platforms, an app may prefer a store on
        /// the Keychain: implement ``DeviceKeyStore``.
        public var keyStore: any DeviceKeyStore
        /// Keys the application shares with its devices, by `kid`: an HS256 signing secret
        /// (`{"kty":"oct","kid":…,"use":"sig","alg":"HS256","k":…}`) and the symmetric
        /// encryption keys of `dir` / `A128KW` / `A256KW` subscriptions (`"use":"enc"`).
        /// Default: none. The asymmetric signing keys come from `/.well-known/jwks.json`.
        public var sharedKeys: [JWK]
        /// The deadline of each HTTP request. Default: 30 seconds.
        public var requestTimeout: Duration
        /// How long the fetched public keys are used before they are fetched again. Default:
        /// one hour.
        public var keysMaxAge: Duration
        /// The least time between two fetches caused by a `kid` the cached keys do not hold,
        /// so that forged notifications cannot make the app hammer the service. Default: 60
        /// seconds.
        public var keysRefetchInterval: Duration
        /// The session requests go through. Default: an ephemeral session (no cookies, no
        /// cache) that follows no redirect (a redirect would carry the bearer token away). A
        /// session of the app's should refuse redirects too.
        public var session: URLSession
        /// The offline queue of ``PushDispatch/offline``: its limit, its back-off, and whether
        /// it is kept on disk across launches (``OfflineQueueConfiguration/isPersistenceEnabled``,
        /// like Firebase's). Default: in memory, 256 operations.
        public var offlineQueue: OfflineQueueConfiguration

        /// A configuration with the defaults above.
        public init(
            baseURL: URL, app: String, credentials: @escaping CredentialsProvider, deviceToken: DeviceToken? = nil,
            keyStore: (any DeviceKeyStore)? = nil, sharedKeys: [JWK] = [], requestTimeout: Duration = .seconds(30),
            keysMaxAge: Duration = .seconds(3600), keysRefetchInterval: Duration = .seconds(60),
            session: URLSession? = nil, offlineQueue: OfflineQueueConfiguration = OfflineQueueConfiguration()
        ) {
            self.baseURL = baseURL
            self.app = app
            self.credentials = credentials
            self.deviceToken = deviceToken
            self.keyStore = keyStore ?? FileDeviceKeyStore.standard(app: app)
            self.sharedKeys = sharedKeys
            self.requestTimeout = requestTimeout
            self.keysMaxAge = keysMaxAge
            self.keysRefetchInterval = keysRefetchInterval
            self.session = session ?? RefusingRedirects.session()
            self.offlineQueue = offlineQueue
        }
    }
}
