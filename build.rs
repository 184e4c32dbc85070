// Compile proto/runtime/v1/api.proto (CRI runtime.v1) with the pure-Rust `protox`
// compiler (no protoc needed), then generate the tonic client with tonic-prost-build.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("proto");
    let file = proto_dir.join("runtime/v1/api.proto");
    println!("cargo:rerun-if-changed={}", file.display());

    let fds = protox::compile([&file], [&proto_dir])?;
    tonic_prost_build::configure()
        .build_server(false)
        .build_client(true)
        .compile_fds(fds)?;
    Ok(())
}
