#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Tells ThreadSanitizer about lock hand-offs it cannot see by itself.
///
/// On Linux, `Synchronization.Mutex` locks with futex calls inside the (uninstrumented)
/// standard library, so a TSan build reports every access guarded by a `Mutex` as a race.
/// When the TSan runtime is loaded (`__tsan_acquire` resolves), each guarded section reports
/// an acquire on entry and a release on exit, keyed by the lock's owner object. Without TSan
/// the hooks are absent and each call is a load and a branch.
@usableFromInline
enum ThreadSanitizerHooks {
    typealias Hook = @convention(c) (UnsafeMutableRawPointer?) -> Void

    private struct Hooks: @unchecked Sendable {
        // @unchecked: two immutable C function pointers into the TSan runtime, which is thread-safe.
        let acquire: Hook
        let release: Hook
    }

    private static let hooks: Hooks? = {
        guard let acquire = dlsym(nil, "__tsan_acquire"), let release = dlsym(nil, "__tsan_release") else {
            return nil
        }
        return Hooks(
            acquire: unsafeBitCast(acquire, to: Hook.self),
            release: unsafeBitCast(release, to: Hook.self))
    }()

    @usableFromInline
    static func acquire(_ token: UnsafeMutableRawPointer) {
        hooks?.acquire(token)
    }

    @usableFromInline
    static func release(_ token: UnsafeMutableRawPointer) {
        hooks?.release(token)
    }
}
