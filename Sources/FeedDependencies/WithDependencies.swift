/// Runs `operation` with dependencies changed by `update`, for that scope only.
///
/// `update` receives a copy of ``DependencyValues/current``; the copy is bound as the current
/// values (a task-local) while `operation` runs. Code in `operation` and its child tasks sees
/// the overrides; the caller, sibling tasks and detached tasks do not. Runs synchronously on
/// the caller's thread and rethrows whatever `update` or `operation` throws.
public func withDependencies<R>(
    _ update: (inout DependencyValues) throws -> Void,
    operation: () throws -> R
) rethrows -> R {
    var values = DependencyValues.current
    try update(&values)
    return try DependencyValues.$current.withValue(values, operation: operation)
}

/// Runs the async `operation` with dependencies changed by `update`, for that scope only.
///
/// Same scoping as the synchronous overload: `operation`, its `async let`s, task-group tasks and
/// `Task { }`s see the overrides; the caller, sibling tasks and `Task.detached` do not. It runs
/// on the caller's executor (it never hops to the main actor or anywhere else) and rethrows.
public func withDependencies<R>(
    _ update: (inout DependencyValues) throws -> Void,
    operation: () async throws -> R
) async rethrows -> R {
    var values = DependencyValues.current
    try update(&values)
    return try await DependencyValues.$current.withValue(values, operation: operation)
}
