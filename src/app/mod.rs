//! The CLI, the start-up flow, the loops and the HTTP endpoints.
