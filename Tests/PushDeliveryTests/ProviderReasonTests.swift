import PushDelivery
import Testing

/// Provider reasons read into known cases, anything else kept as it came.
@Suite("Provider reasons: known codes are cases, others are kept")
struct ProviderReasonTests {
    @Test(
        "FCM error codes",
        arguments: [
            ("UNREGISTERED", FCMErrorCode.unregistered), ("SENDER_ID_MISMATCH", .senderIDMismatch), ("INVALID_ARGUMENT", .invalidArgument),
            ("QUOTA_EXCEEDED", .quotaExceeded), ("UNAVAILABLE", .unavailable), ("INTERNAL", .internal), ("UNSPECIFIED_ERROR", .unspecifiedError),
            ("THIRD_PARTY_AUTH_ERROR", .thirdPartyAuthError), ("APNS_AUTH_ERROR", .apnsAuthError), ("unregistered", .unknown("unregistered")),
            ("", .unknown("")),
        ])
    func fcm(text: String, expected: FCMErrorCode) {
        #expect(FCMErrorCode(text) == expected)
    }

    @Test(
        "Google API statuses",
        arguments: [
            ("UNAUTHENTICATED", GoogleRPCStatus.unauthenticated), ("PERMISSION_DENIED", .permissionDenied),
            ("RESOURCE_EXHAUSTED", .resourceExhausted), ("UNAVAILABLE", .unavailable), ("INTERNAL", .internal),
            ("DEADLINE_EXCEEDED", .deadlineExceeded), ("INVALID_ARGUMENT", .invalidArgument), ("NOT_FOUND", .unknown("NOT_FOUND")),
        ])
    func google(text: String, expected: GoogleRPCStatus) {
        #expect(GoogleRPCStatus(text) == expected)
    }

    @Test(
        "HMS result codes",
        arguments: [
            ("80000000", HMSResultCode.success), ("80100000", .partialSuccess), ("80100001", .parameterError), ("80100003", .structureError),
            ("80100017", .tooManyMessages), ("80200001", .authenticationError), ("80200003", .tokenExpired), ("80300002", .notAllowed),
            ("80300007", .allTokensInvalid), ("80300008", .bodyTooLarge), ("81000001", .systemError), ("80100004", .unknown("80100004")),
        ])
    func hms(text: String, expected: HMSResultCode) {
        #expect(HMSResultCode(text) == expected)
    }

    @Test(
        "APNs reasons",
        arguments: [
            ("BadDeviceToken", APNsReason.badDeviceToken), ("DeviceTokenNotForTopic", .deviceTokenNotForTopic),
            ("TopicDisallowed", .topicDisallowed), ("IdleTimeout", .idleTimeout), ("ExpiredProviderToken", .expiredProviderToken),
            ("UnrelatedKeyIdInToken", .unrelatedKeyIdInToken), ("TooManyProviderTokenUpdates", .tooManyProviderTokenUpdates),
            ("PayloadTooLarge", .unknown("PayloadTooLarge")), ("baddevicetoken", .unknown("baddevicetoken")),
        ])
    func apns(text: String, expected: APNsReason) {
        #expect(APNsReason(text) == expected)
    }
}
