/// A namespace for the publisher types that operators return (`Publishers.Map`, `Publishers.Filter`, …).
public enum Publishers {}
