//! The fuzz targets' short runs (fuzz/targets.rs; the bench `fuzz` runs them long): each
//! parser that takes outside input answers arbitrary and mutated inputs with a value or
//! a typed error that says something, and never panics. `RKUBELET_FUZZ_CASES` sets the
//! inputs per target (default 2,000), `RKUBELET_FUZZ_SEED` the seed (default: the time,
//! printed, so a failure can be replayed).

use crate::fuzz_targets::{run, targets};

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn every_parser_answers_fuzzed_input_without_panicking() {
    let cases = u32::try_from(env_number("RKUBELET_FUZZ_CASES", 2_000)).unwrap_or(u32::MAX);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let seed = env_number("RKUBELET_FUZZ_SEED", now);
    let mut failures = Vec::new();
    for target in targets() {
        let report = run(&target, cases, seed);
        println!(
            "FIGURE fuzz {}: {} executions in {:.1} s, slowest {:.1} ms, seed {seed}",
            report.target,
            report.executions,
            report.took.as_secs_f64(),
            report.slowest.as_secs_f64() * 1e3
        );
        if let Some(failure) = report.failure {
            failures.push(format!("{} (seed {seed}): {failure}", report.target));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Nesting up to and beyond each parser's limit, in every format the targets read, on
/// the 2 MiB stack of a test thread (and of a tokio worker): refused or decoded, never
/// a stack overflow (a fuzzed input found one).
#[test]
fn nesting_at_every_depth_fits_a_two_mebibyte_stack() {
    let repeat = |open: &str, close: &str, depth: usize| {
        format!("{}1{}", open.repeat(depth), close.repeat(depth))
    };
    let indented = |depth: usize| {
        (0..depth)
            .map(|level| format!("{}k:\n", " ".repeat(level)))
            .collect::<String>()
    };
    // A shape's name, the config file format it is read as (the first byte), its text.
    type Shape<'a> = (&'a str, u8, &'a dyn Fn(usize) -> String);
    let shapes: [Shape; 9] = [
        ("json array", 1, &|d| repeat("[", "]", d)),
        ("json object", 1, &|d| repeat("{\"a\":", "}", d)),
        ("yaml flow", 0, &|d| repeat("a: [", "]", d)),
        ("yaml flow map", 0, &|d| repeat("{b: ", "}", d)),
        ("yaml block sequence", 0, &|d| repeat("- ", "", d)),
        ("yaml block mapping", 0, &|d| indented(d)),
        ("yaml complex keys", 0, &|d| repeat("? ", "", d)),
        ("toml array", 2, &|d| repeat("a = [", "]", d)),
        ("toml inline table", 2, &|d| repeat("a = {b = ", "}", d)),
    ];
    for target in targets() {
        for (shape, format, body) in shapes {
            for depth in [64usize, 127, 129, 255, 257, 511, 513, 2_000] {
                // The config file target picks its format from the first byte.
                let mut input = vec![format];
                input.extend_from_slice(body(depth).as_bytes());
                println!("{} {shape} {depth}", target.name);
                let check = target.check;
                let outcome = std::thread::Builder::new()
                    .stack_size(2 << 20)
                    .spawn(move || check(&input))
                    .map(|t| t.join());
                assert!(
                    matches!(outcome, Ok(Ok(_))),
                    "{} {shape} at depth {depth} panicked",
                    target.name
                );
            }
        }
    }
}
