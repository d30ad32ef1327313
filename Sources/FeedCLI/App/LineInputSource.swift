internal import FeedSync
internal import Foundation

/// The "view" of `feedsync app`: reads lines from stdin on its own thread and hands each parsed action to its listener
/// through `send(action:)`; at end of input it finishes the listener's stream.
///
/// The listener is held weakly, as a delegate is: when the app drops its adapter, input stops being delivered.
final class LineInputSource {

    /// Starts reading at once, sending to `listener`.
    init(listener: ActionStreamAdapter<AppAction>) {
        let thread = Thread { [weak listener] in
            while let line = readLine(strippingNewline: true) {
                guard let listener else { return }
                if let action = AppAction.parse(line) { listener.send(action: action) }
            }
            listener?.finish()
        }
        thread.name = "feedsync.stdin"
        thread.start()
    }
}
