// Compile proto/runtime/v1/api.proto (CRI runtime.v1) with the pure-Rust `protox`
// compiler (no protoc needed), then generate the tonic client with tonic-prost-build.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Read at run time: a build script binary reused from another checkout would carry
    // that checkout's path if it were compiled in.
    let proto_dir = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("proto");
    let file = proto_dir.join("runtime/v1/api.proto");
    println!("cargo:rerun-if-changed={}", file.display());
    // Read by the linker wrapper (scripts/link/cc-hot-first): a new list links anew.
    println!("cargo:rerun-if-changed=packaging/hot-functions.txt");

    let fds = protox::compile([&file], [&proto_dir])?;
    tonic_prost_build::configure()
        .build_server(false)
        .build_client(true)
        .compile_fds(fds)?;
    Ok(())
}
