import ArgumentParser
import EventDecoding
import Foundation
import PushCore

/// `push-gateway validate-event`: the publisher's check. Decodes an event exactly as the gateway does and
/// says what the gateway will do with it, or the reason it would be dead-lettered (docs/PUBLISHING.md).
struct ValidateEventCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "validate-event",
        abstract: "Check a change event (or a user notification): what the gateway will do with it, or why it would be dead-lettered",
        discussion: """
            EVENT is the record's value: the JSON form ({"appId":"demo","path":"/chat","op":"set","after":{"m":"hi"}}) \
            or, with --file or on standard input, protobuf bytes. The content type is guessed (JSON when the value \
            starts with '{') unless --content-type gives the record's header as it will be published ('none': no \
            header). With --user-notification, EVENT is a record of the user-notifications topic \
            ({"appId":"demo","uid":"alice","data":{"title":"hi"},"eventId":"e-1"}). Exit status: 0 accepted, \
            1 dead-lettered, 64 usage.
            """)

    @Argument(help: "The event (JSON text); - or nothing reads standard input.")
    var event: String = "-"

    @Option(help: ArgumentHelp("Read the event from a file (JSON or protobuf bytes).", valueName: "path"))
    var file: String?

    @Option(
        name: .customLong("content-type"),
        help: "The record's content-type header as it will be published: application/json, or none (protobuf).")
    var contentType: String?

    @Option(help: "The record key as it will be published ('' for no key; default: the app id).")
    var key: String?

    @Flag(
        name: .customLong("user-notification"),
        help: "EVENT is a record of the user-notifications topic (pushgateway.v1.UserNotification), not a change event.")
    var userNotification = false

    func run() throws {
        let value: [UInt8]
        if let file {
            guard let data = FileManager.default.contents(atPath: file) else {
                throw ValidationError("cannot read \(file)")
            }
            value = Array(data)
        } else if event == "-" {
            value = Array(FileHandle.standardInput.readDataToEndOfFile())
        } else {
            value = Array(event.utf8)
        }
        let guessed = contentType == nil
        let header: String?
        switch contentType?.lowercased() {
        case nil: header = EventDecoder.looksLikeJSON(value) ? EventDecoder.jsonContentType : nil
        case "none", "": header = nil
        case let given?: header = given
        }
        let record = RecordForm(
            key: key.map { Array($0.utf8) }, keyGiven: key != nil, contentType: header, contentTypeGuessed: guessed && header != nil)
        do {
            if userNotification {
                let decoded = try UserNotificationDecoder.decode(
                    value: value, contentType: header.map { Array($0.utf8) }, key: record.key)
                return print(UserNotificationReport(notification: decoded, record: record).text, terminator: "")
            }
            let decoded = try EventDecoder.decode(value: value, contentType: header.map { Array($0.utf8) }, key: record.key)
            print(EventReport(event: decoded, record: record).text, terminator: "")
        } catch {
            print("dead-lettered: \(error.reason)")
            print("  (the gateway writes the record to the dead-letter topic with this reason in its x-dlq-reason header)")
            throw ExitCode(1)
        }
    }
}
