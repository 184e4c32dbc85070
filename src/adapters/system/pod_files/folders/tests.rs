//! The pod's folders on real files, in temp dirs.

use std::os::unix::fs::symlink;

use super::*;

fn temp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"))
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).map_or(0, |m| m.mode() & 0o7777)
}

fn group(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).map_or(u32::MAX, |m| m.gid())
}

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("chmod {}: {e}", p.display()));
}

fn write(p: &Path, data: &str) {
    std::fs::write(p, data).unwrap_or_else(|e| panic!("write {}: {e}", p.display()));
}

#[test]
fn an_empty_dir_gets_its_mode_and_the_fs_group_owns_everything_in_it() {
    let dir = temp();
    let path = dir.path().join("cache");
    let mut setup = VolumeSetup {
        path: path.clone(),
        mode: 0o777,
        fs_group: None,
        on_root_mismatch: false,
        readonly: false,
    };
    set_up_empty_dir(&setup).unwrap_or_else(|e| panic!("set up: {e}"));
    assert_eq!(mode(&path), 0o777);

    std::fs::create_dir(path.join("sub")).unwrap_or_else(|e| panic!("sub: {e}"));
    write(&path.join("sub/file"), "x");
    chmod(&path.join("sub/file"), 0o600);
    // A group the test process may give files to whoever it runs as: its own.
    let gid = group(dir.path());
    setup.fs_group = Some(i64::from(gid));
    set_up_empty_dir(&setup).unwrap_or_else(|e| panic!("fs group: {e}"));
    assert_eq!(mode(&path), 0o2777);
    assert_eq!(mode(&path.join("sub")) & 0o2770, 0o2770);
    assert_eq!(mode(&path.join("sub/file")), 0o660);
    assert_eq!(group(&path.join("sub/file")), gid);

    // OnRootMismatch: a matching root is left alone, so a file changed since stays.
    chmod(&path.join("sub/file"), 0o600);
    setup.on_root_mismatch = true;
    set_up_empty_dir(&setup).unwrap_or_else(|e| panic!("skip: {e}"));
    assert_eq!(mode(&path.join("sub/file")), 0o600);
}

/// A container's links in its emptyDir, to a host file and a host folder: the walk
/// changes the links themselves, never what they point to.
#[test]
fn the_fs_group_walk_follows_no_link_out_of_the_volume() {
    let dir = temp();
    let host = dir.path().join("host");
    std::fs::create_dir_all(host.join("folder")).unwrap_or_else(|e| panic!("host: {e}"));
    write(&host.join("secret"), "host");
    write(&host.join("folder/inner"), "host");
    chmod(&host.join("secret"), 0o600);
    chmod(&host.join("folder"), 0o700);
    chmod(&host.join("folder/inner"), 0o600);
    let volume = dir.path().join("pod/volumes/kubernetes.io~empty-dir/v");
    std::fs::create_dir_all(&volume).unwrap_or_else(|e| panic!("volume: {e}"));
    symlink(host.join("secret"), volume.join("to-file")).unwrap_or_else(|e| panic!("link: {e}"));
    symlink(host.join("folder"), volume.join("to-dir")).unwrap_or_else(|e| panic!("link: {e}"));
    write(&volume.join("own"), "pod");
    chmod(&volume.join("own"), 0o600);

    let setup = VolumeSetup {
        path: volume.clone(),
        mode: 0o777,
        fs_group: Some(i64::from(group(dir.path()))),
        on_root_mismatch: false,
        readonly: false,
    };
    set_up_empty_dir(&setup).unwrap_or_else(|e| panic!("walk: {e}"));
    assert_eq!(mode(&volume.join("own")), 0o660, "the volume's own file");
    assert_eq!(mode(&host.join("secret")), 0o600);
    assert_eq!(mode(&host.join("folder")), 0o700);
    assert_eq!(mode(&host.join("folder/inner")), 0o600);
    assert!(
        std::fs::symlink_metadata(volume.join("to-dir")).is_ok_and(|m| m.file_type().is_symlink())
    );
}

#[test]
fn host_path_kinds_and_creation() {
    let dir = temp();
    let d = dir.path().join("a/b");
    create_dir_all(&d, Some(0o755)).unwrap_or_else(|e| panic!("dir: {e}"));
    assert_eq!(file_kind(&d), Some(FileKind::Directory));
    assert_eq!(mode(&d), 0o755);
    // An existing folder keeps its mode.
    chmod(&d, 0o700);
    create_dir_all(&d, Some(0o755)).unwrap_or_else(|e| panic!("again: {e}"));
    assert_eq!(mode(&d), 0o700);

    let f = dir.path().join("f");
    create_file(&f, 0o644).unwrap_or_else(|e| panic!("file: {e}"));
    assert_eq!(file_kind(&f), Some(FileKind::File));
    assert_eq!(mode(&f), 0o644);
    assert_eq!(file_kind(&dir.path().join("nope")), None);
    // Followed, as upstream's check: a link to a folder is a folder.
    symlink(&d, dir.path().join("l")).unwrap_or_else(|e| panic!("link: {e}"));
    assert_eq!(file_kind(&dir.path().join("l")), Some(FileKind::Directory));
    let missing_parent = create_file(&dir.path().join("no/such"), 0o644);
    assert!(missing_parent.is_err(), "{missing_parent:?}");
}

#[test]
fn a_message_file_keeps_its_content_and_gets_its_mode() {
    let dir = temp();
    let f = dir.path().join("0");
    write(&f, "written by the container");
    chmod(&f, 0o600);
    create_file(&f, 0o666).unwrap_or_else(|e| panic!("file: {e}"));
    assert_eq!(mode(&f), 0o666);
    assert_eq!(
        read_at_most(&f, 7).ok().flatten().as_deref(),
        Some(&b"written"[..])
    );
    assert_eq!(
        read_at_most(&f, 4096).ok().flatten().map(|d| d.len()),
        Some(24)
    );
    assert_eq!(
        read_at_most(&dir.path().join("missing"), 10).ok(),
        Some(None)
    );
    // Never through a link: the host file it names stays as it was.
    let host = dir.path().join("host");
    write(&host, "host");
    chmod(&host, 0o600);
    symlink(&host, dir.path().join("1")).unwrap_or_else(|e| panic!("link: {e}"));
    assert!(create_file(&dir.path().join("1"), 0o666).is_err());
    assert!(write_file(&dir.path().join("1"), b"pwned").is_err());
    assert_eq!(mode(&host), 0o600);
    assert_eq!(std::fs::read_to_string(&host).ok().as_deref(), Some("host"));
}

#[test]
fn files_are_written_listed_and_removed() {
    let dir = temp();
    let hosts = dir.path().join("etc-hosts");
    write_file(&hosts, b"a long first content").unwrap_or_else(|e| panic!("write: {e}"));
    write_file(&hosts, b"short").unwrap_or_else(|e| panic!("rewrite: {e}"));
    assert_eq!(
        read_at_most(&hosts, u64::MAX).ok().flatten().as_deref(),
        Some(&b"short"[..])
    );

    let mut names = list_dir(dir.path()).unwrap_or_else(|e| panic!("list: {e}"));
    names.sort();
    assert_eq!(names, ["etc-hosts"]);
    assert_eq!(list_dir(&dir.path().join("missing")).ok(), Some(Vec::new()));

    remove_file(&hosts).unwrap_or_else(|e| panic!("remove: {e}"));
    remove_file(&hosts).unwrap_or_else(|e| panic!("a missing file is removed: {e}"));
    let logs = dir.path().join("logs/pod");
    std::fs::create_dir_all(logs.join("app")).unwrap_or_else(|e| panic!("logs: {e}"));
    write(&logs.join("app/0.log"), "x");
    // A link in it is removed, not what it names.
    let host = dir.path().join("host");
    std::fs::create_dir(&host).unwrap_or_else(|e| panic!("host: {e}"));
    write(&host.join("keep"), "x");
    symlink(&host, logs.join("app/out")).unwrap_or_else(|e| panic!("link: {e}"));
    remove_dir_all(&logs).unwrap_or_else(|e| panic!("remove all: {e}"));
    assert!(!logs.exists());
    assert!(host.join("keep").exists());
    remove_dir_all(&logs).unwrap_or_else(|e| panic!("a missing folder is removed: {e}"));
}

#[test]
fn mounts_under_a_folder_are_read_from_mountinfo_with_its_escapes() {
    let info = "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n\
                90 22 0:50 / /var/lib/kubelet/pods/u1/volumes/kubernetes.io~empty-dir/mem rw - tmpfs tmpfs rw\n\
                91 22 0:51 / /var/lib/kubelet/pods/u1/volume-subpaths/my\\040vol/app/0 rw - ext4 /dev/sda1 rw\n\
                92 22 0:52 / /var/lib/kubelet/pods/u10/x rw - tmpfs tmpfs rw\n";
    let found = mounts_under(info, Path::new("/var/lib/kubelet/pods/u1"));
    assert_eq!(
        found,
        [
            PathBuf::from("/var/lib/kubelet/pods/u1/volumes/kubernetes.io~empty-dir/mem"),
            PathBuf::from("/var/lib/kubelet/pods/u1/volume-subpaths/my vol/app/0"),
        ]
    );
}

#[test]
fn a_pod_folder_without_mounts_is_removed() {
    let dir = temp();
    let pod = dir.path().join("pods/u1");
    std::fs::create_dir_all(pod.join("volumes/kubernetes.io~empty-dir/v"))
        .unwrap_or_else(|e| panic!("pod: {e}"));
    write(&pod.join("etc-hosts"), "x");
    remove_pod_dir(&pod).unwrap_or_else(|e| panic!("remove: {e:?}"));
    assert!(!pod.exists());
    remove_pod_dir(&pod).unwrap_or_else(|e| panic!("a missing folder is removed: {e:?}"));
}

/// Mounting needs mount(2): root, as scripts/test.sh runs the tests.
#[test]
#[ignore = "needs root (mount): run by scripts/test.sh"]
fn a_tmpfs_is_mounted_once_and_unmounted_with_its_pod_folder() {
    let dir = temp();
    let pod = dir.path().join("pods/u1");
    let mem = pod.join("volumes/kubernetes.io~empty-dir/mem");
    mount_tmpfs(&mem, Some(1 << 20), 0o777).unwrap_or_else(|e| panic!("mount: {e}"));
    mount_tmpfs(&mem, Some(1 << 20), 0o777).unwrap_or_else(|e| panic!("again: {e}"));
    let count = mounts_under(&read_mountinfo(), &mem).len();
    let is_mount = is_mount_point(&mem);
    let removed = remove_pod_dir(&pod);
    let left = mounts_under(&read_mountinfo(), &pod);
    for p in &left {
        let _ = nix::mount::umount2(p, nix::mount::MntFlags::MNT_DETACH);
    }
    assert!(is_mount);
    assert_eq!(count, 1, "mounted once");
    assert!(removed.is_ok(), "{removed:?}");
    assert!(left.is_empty(), "{left:?}");
    assert!(!pod.exists());
}
