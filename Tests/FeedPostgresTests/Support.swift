// Helpers shared by the PostgreSQL backend tests live beside them in this target.
