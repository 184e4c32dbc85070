// Compile proto/ (the CRI runtime.v1, plugin registration v1, CSI v1's node service,
// the device plugin API v1beta1, the pod resources API v1) with the pure-Rust `protox`
// compiler (no protoc needed), then generate the tonic clients and, for the two APIs
// the kubelet serves (device plugin registration, pod resources), the servers, with
// tonic-prost-build.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Read at run time: a build script binary reused from another checkout would carry
    // that checkout's path if it were compiled in.
    let proto_dir = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("proto");
    // The CRI, the kubelet's plugin registration, and the CSI node service.
    let files = [
        proto_dir.join("runtime/v1/api.proto"),
        proto_dir.join("pluginregistration/v1/registration.proto"),
        proto_dir.join("csi/v1/csi.proto"),
        proto_dir.join("deviceplugin/v1beta1/api.proto"),
        proto_dir.join("podresources/v1/api.proto"),
    ];
    for file in &files {
        println!("cargo:rerun-if-changed={}", file.display());
    }
    // Read by the linker wrapper (scripts/link/cc-hot-first): a new list links anew.
    println!("cargo:rerun-if-changed=packaging/hot-functions.txt");

    commit_and_date();

    let fds = protox::compile(&files, [&proto_dir])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        // A plugin's answer is stored as its bytes (the checkpoint's `AllocResp`):
        // maps in key order encode the same answer to the same bytes.
        .btree_map(".v1beta1")
        .compile_fds(fds)?;
    Ok(())
}

/// The commit rkubelet is built from and the build's date, for `--version=raw` and
/// `rkubelet version` (`RKUBELET_COMMIT`, `RKUBELET_BUILD_DATE`); "unknown" outside a git
/// checkout. The script runs again when the checkout moves to another commit.
fn commit_and_date() {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .env("TZ", "UTC")
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .map(|s| s.trim().to_owned())
    };
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
        if let Some(head_ref) = git(&["symbolic-ref", "-q", "HEAD"]) {
            println!("cargo:rerun-if-changed={dir}/{head_ref}");
            // Named only where it exists: cargo takes a missing file as changed, and would
            // rebuild the crate on every build (a repository whose refs were never packed).
            let packed = std::path::Path::new(&dir).join("packed-refs");
            if packed.exists() {
                println!("cargo:rerun-if-changed={}", packed.display());
            }
        }
    }
    let commit = git(&["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".into());
    // The commit's date, not the clock's: the same commit builds the same binary.
    let date = git(&[
        "log",
        "-1",
        "--format=%cd",
        "--date=format-local:%Y-%m-%dT%H:%M:%SZ",
    ])
    .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=RKUBELET_COMMIT={commit}");
    println!("cargo:rustc-env=RKUBELET_BUILD_DATE={date}");
}
