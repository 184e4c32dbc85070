//! Traits the domain and the app need from the world.
