// The types of other modules that this library's public API names, re-exported so that an app
// that imports only PushDispatchClient can name them: keys (`Configuration.sharedKeys`,
// `NotificationReader(app:keys:)`, `devicePublicKey()`), values (`NotificationEvent.value`,
// `ChildChanges`), and a subscription's mode, format and a notification's status. Only these:
// the rest of those modules stays out of the app's namespace.
@_exported import struct PushJOSE.JWK
@_exported import enum PushJSON.JSON
@_exported import enum PushCore.Mode
@_exported import enum PushCore.PayloadFormat
@_exported import enum PushCore.PayloadStatus
