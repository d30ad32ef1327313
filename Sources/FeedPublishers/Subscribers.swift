/// A namespace for subscriber-related types: `Demand`, `Completion` and `Sink`.
public enum Subscribers {}
