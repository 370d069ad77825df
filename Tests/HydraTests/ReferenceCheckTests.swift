import Foundation
import Testing

@testable import Hydra

/// References that can never resolve are refused at submit, naming the field
/// (protocol §4 References); those only the run can judge still fail the step.
@Suite struct ReferenceCheckTests {
    @Test func referencesThatCanNeverResolveAreRefusedAtSubmit() throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let echo = #"{"type":"local","name":"echo","input":1}"#
        let refused: [(String, String)] = [
            (#"{"type":"serial","steps":[\#(echo),{"type":"local","name":"echo","input":{"a":"${prv.x}"}}]}"#,
             "steps[1].input.a"),
            (#"{"type":"serial","steps":[\#(echo),{"type":"local","name":"echo","input":"${steps}"}]}"#, "steps[1].input"),
            (#"{"type":"serial","steps":[\#(echo),{"type":"local","name":"echo","input":"x ${input.x"}]}"#, "steps[1].input"),
            (#"{"type":"serial","steps":[\#(echo),{"type":"local","name":"echo","input":"${steps.nope.body}"}]}"#,
             "steps[1].input"),
            (#"{"type":"serial","steps":[{"type":"local","name":"echo","input":"${prev}"}]}"#, "steps[0].input"),
            (#"{"type":"concurrent","steps":[\#(echo),{"type":"local","name":"echo","input":"${prev}"}]}"#, "steps[1].input"),
            (#"{"type":"local","name":"echo","input":"${prev}"}"#, "input"),
            (#"{"type":"remote","url":"http://h/${shared.}"}"#, "url"),
            (#"{"type":"remote","url":"http://h/","headers":{"X":"${what.x}"}}"#, "headers.X"),
        ]
        for (text, field) in refused {
            let error = #expect(throws: ValidationError.self, "\(text)") { try engine.submit(spec(text)) }
            #expect(error?.path == field, "\(text): \(String(describing: error))")
            #expect(error?.kind == .invalid)
        }
    }

    @Test func referencesThatMayResolveAreAccepted() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let accepted = [
            // prev inside a concurrent group that follows a serial step: that step's result.
            #"{"type":"serial","steps":[{"type":"local","name":"echo","input":7},{"type":"concurrent","steps":[{"type":"local","name":"echo","input":"${prev}"}]}]}"#,
            #"{"type":"concurrent","steps":[{"type":"local","id":"a","name":"echo","input":1},{"type":"local","name":"echo","input":"${steps.a}"}]}"#,
            #"{"type":"local","name":"echo","input":"${input.x} and ${shared.k} and ${env.HOME}"}"#,
        ]
        for text in accepted { _ = try engine.submit(spec(text)) }
        let first = try await engine.run(spec(accepted[0]))
        #expect(first.result?["results"]?[1]?["results"] == [7])
    }
}
