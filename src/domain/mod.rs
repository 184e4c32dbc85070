//! Pure decisions and their types: no I/O, no async runtime, no backend crate.
