//! The attacks a container can make through its volume's contents, on real files: each
//! must be refused, and nothing outside the volume read, written or removed.

use super::*;
use std::collections::BTreeMap;
use std::os::unix::fs::symlink;

struct Volume {
    _dir: tempfile::TempDir,
    /// Stands for the host: what a link out of the volume reaches.
    host: PathBuf,
    volume: PathBuf,
    pod: PathBuf,
}

fn volume() -> Volume {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
    let host = dir.path().join("host");
    let volume = dir.path().join("pod/volumes/kubernetes.io~empty-dir/v");
    let pod = dir.path().join("pod");
    for d in [&host, &volume] {
        std::fs::create_dir_all(d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
    }
    std::fs::write(host.join("sentinel"), "host").unwrap_or_else(|e| panic!("sentinel: {e}"));
    Volume {
        _dir: dir,
        host,
        volume,
        pod,
    }
}

impl Volume {
    fn sub(&self, path: &str) -> SubPath {
        SubPath {
            volume: "v".into(),
            volume_path: self.volume.clone(),
            path: path.into(),
            target: self.pod.join("volume-subpaths/v/app/0"),
        }
    }

    fn host_unchanged(&self) {
        let names: Vec<_> = std::fs::read_dir(&self.host)
            .map(|d| d.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default();
        assert_eq!(names, [std::ffi::OsString::from("sentinel")]);
        assert_eq!(
            std::fs::read_to_string(self.host.join("sentinel"))
                .ok()
                .as_deref(),
            Some("host")
        );
    }
}

#[test]
fn a_subpath_through_a_link_out_of_the_volume_is_refused_before_any_bind() {
    let v = volume();
    // CVE-2017-1002101: `ln -s / /v/evil`, then `subPath: evil`.
    symlink("/", v.volume.join("evil")).unwrap_or_else(|e| panic!("link: {e}"));
    symlink(&v.host, v.volume.join("abs")).unwrap_or_else(|e| panic!("link: {e}"));
    std::fs::create_dir(v.volume.join("d")).unwrap_or_else(|e| panic!("d: {e}"));
    symlink("../../../../../host", v.volume.join("d/up")).unwrap_or_else(|e| panic!("link: {e}"));
    for path in ["evil", "abs", "abs/sentinel", "d/up", "d/up/new/dir"] {
        let got = SystemPodFiles.bind_sub_path(&v.sub(path));
        assert!(
            matches!(got, Err(PodFilesError::OutsideVolume { .. })),
            "{path}: {got:?}"
        );
    }
    assert!(
        !v.pod.join("volume-subpaths").exists(),
        "no bind target made"
    );
    v.host_unchanged();
}

#[test]
fn a_missing_subpath_is_made_in_the_volume_with_its_mode_never_through_a_link() {
    let v = volume();
    std::fs::set_permissions(&v.volume, std::fs::Permissions::from_mode(0o2777))
        .unwrap_or_else(|e| panic!("chmod: {e}"));
    let rel: Vec<&OsStr> = ["a", "b"].iter().map(OsStr::new).collect();
    make_dirs_beneath(&v.volume, &rel, 0o2777).unwrap_or_else(|e| panic!("make: {e}"));
    let mode = std::fs::metadata(v.volume.join("a/b")).map(|m| m.mode() & 0o7777);
    assert_eq!(mode.ok(), Some(0o2777));
    // A link where a folder is to be made is never followed.
    symlink(&v.host, v.volume.join("l")).unwrap_or_else(|e| panic!("link: {e}"));
    let rel: Vec<&OsStr> = ["l", "new"].iter().map(OsStr::new).collect();
    let got = make_dirs_beneath(&v.volume, &rel, 0o755);
    assert!(matches!(got, Err(PodFilesError::Symlink { .. })), "{got:?}");
    v.host_unchanged();
}

#[test]
fn the_open_meets_no_link_even_one_swapped_in_after_the_check() {
    let v = volume();
    std::fs::create_dir_all(v.volume.join("a/b")).unwrap_or_else(|e| panic!("a/b: {e}"));
    let base = open_dir(&v.volume).unwrap_or_else(|e| panic!("open: {e}"));
    let opened = open_beneath(base.as_fd(), Path::new("a/b"), &v.volume.join("a/b"));
    assert!(opened.is_ok(), "{opened:?}");
    // CVE-2021-25741: the checked path's folder becomes a link before the open.
    std::fs::remove_dir_all(v.volume.join("a")).unwrap_or_else(|e| panic!("rm: {e}"));
    symlink(&v.host, v.volume.join("a")).unwrap_or_else(|e| panic!("link: {e}"));
    let swapped = open_beneath(base.as_fd(), Path::new("a/sentinel"), &v.volume.join("a"));
    assert!(
        matches!(swapped, Err(PodFilesError::Symlink { .. })),
        "{swapped:?}"
    );
    let dotdot = open_beneath(base.as_fd(), Path::new("../host"), &v.volume);
    assert!(dotdot.is_err(), "{dotdot:?}");
}

/// Binding needs mount(2): root, as scripts/test.sh runs the tests.
#[test]
#[ignore = "needs root (mount): run by scripts/test.sh"]
fn a_subpath_inside_the_volume_is_bound_from_what_was_opened_and_kept_on_a_second_call() {
    let v = volume();
    std::fs::create_dir_all(v.volume.join("real")).unwrap_or_else(|e| panic!("real: {e}"));
    std::fs::write(v.volume.join("real/f"), "in volume").unwrap_or_else(|e| panic!("f: {e}"));
    // A link that stays in the volume is followed as upstream follows it.
    symlink("real", v.volume.join("inner")).unwrap_or_else(|e| panic!("link: {e}"));
    let sub = v.sub("inner");
    SystemPodFiles
        .bind_sub_path(&sub)
        .unwrap_or_else(|e| panic!("bind: {e}"));
    let unmount = || {
        let _ = nix::mount::umount2(&sub.target, nix::mount::MntFlags::MNT_DETACH);
    };
    let seen = std::fs::read_to_string(sub.target.join("f"));
    let again = SystemPodFiles.bind_sub_path(&sub);
    let mounts = std::fs::read_to_string("/proc/self/mountinfo")
        .map(|m| {
            m.lines()
                .filter(|l| l.split(' ').nth(4) == Some(&*sub.target.to_string_lossy()))
                .count()
        })
        .unwrap_or(0);
    // A missing one is made, then bound.
    let made = v.sub("logs/web-1");
    let made_target = PathBuf::from(format!("{}-made", made.target.display()));
    let made = SubPath {
        target: made_target.clone(),
        ..made
    };
    let made_result = SystemPodFiles.bind_sub_path(&made);
    let _ = nix::mount::umount2(&made_target, nix::mount::MntFlags::MNT_DETACH);
    unmount();
    assert_eq!(seen.ok().as_deref(), Some("in volume"));
    assert!(again.is_ok(), "{again:?}");
    assert_eq!(mounts, 1, "the second call keeps the first bind");
    assert!(made_result.is_ok(), "{made_result:?}");
    assert!(v.volume.join("logs/web-1").is_dir());
    v.host_unchanged();
}

fn file(data: &str) -> FileProjection {
    FileProjection {
        data: data.as_bytes().to_vec(),
        mode: 0o644,
    }
}

#[test]
fn the_writer_swaps_data_in_one_rename_and_removes_only_its_own_old_folder() {
    let v = volume();
    let dir = v.volume.clone();
    let first = Payload::from([("a".into(), file("1")), ("sub/b".into(), file("2"))]);
    let stamp1 = "2026_01_01_00_00_00.1";
    assert!(matches!(
        SystemPodFiles.write_atomically(&dir, &first, &FilesOwnership::default(), stamp1),
        Ok(true)
    ));
    assert_eq!(
        std::fs::read_link(dir.join("..data")).ok(),
        Some(PathBuf::from(format!("..{stamp1}")))
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("sub/b")).ok().as_deref(),
        Some("2")
    );
    assert!(matches!(
        SystemPodFiles.write_atomically(
            &dir,
            &first,
            &FilesOwnership::default(),
            "2026_01_01_00_00_01.2"
        ),
        Ok(false)
    ));
    let second = Payload::from([("a".into(), file("9"))]);
    assert!(matches!(
        SystemPodFiles.write_atomically(
            &dir,
            &second,
            &FilesOwnership::default(),
            "2026_01_01_00_00_02.3"
        ),
        Ok(true)
    ));
    assert_eq!(
        std::fs::read_to_string(dir.join("a")).ok().as_deref(),
        Some("9")
    );
    assert!(!dir.join(format!("..{stamp1}")).exists());
    assert!(std::fs::symlink_metadata(dir.join("sub")).is_err());
}

#[test]
fn with_a_group_the_writer_gives_it_every_folder_file_and_link_and_a_user_its_files() {
    let v = volume();
    let dir = v.volume.clone();
    let meta =
        |p: &Path| std::fs::symlink_metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    // Ids the test process may give files to whoever it runs as: its own.
    let (uid, gid) = (meta(&dir).uid(), meta(&dir).gid());
    let payload = Payload::from([
        (
            "token".into(),
            FileProjection {
                data: b"t".to_vec(),
                mode: 0o640,
            },
        ),
        (
            "sub/key".into(),
            FileProjection {
                data: b"k".to_vec(),
                mode: 0o440,
            },
        ),
    ]);
    let ownership = FilesOwnership {
        group: Some(gid),
        users: BTreeMap::from([("token".to_owned(), uid)]),
        dir_mode: 0o2755,
    };
    let written =
        SystemPodFiles.write_atomically(&dir, &payload, &ownership, "2026_01_01_00_00_00.1");
    assert!(matches!(written, Ok(true)), "{written:?}");
    let data = dir.join("..2026_01_01_00_00_00.1");
    for folder in [&dir, &data, &data.join("sub")] {
        assert_eq!(meta(folder).mode() & 0o7777, 0o2755, "{}", folder.display());
        assert_eq!(meta(folder).gid(), gid, "{}", folder.display());
    }
    assert_eq!(meta(&data.join("sub/key")).mode() & 0o7777, 0o440);
    assert_eq!(meta(&data.join("token")).mode() & 0o7777, 0o640);
    assert_eq!(meta(&data.join("token")).uid(), uid);
    for link in ["..data", "token", "sub"] {
        assert_eq!(meta(&dir.join(link)).gid(), gid, "{link}");
    }
    // Unchanged: nothing written again.
    let again =
        SystemPodFiles.write_atomically(&dir, &payload, &ownership, "2026_01_01_00_00_01.2");
    assert!(matches!(again, Ok(false)), "{again:?}");
}

#[test]
fn a_data_link_swapped_to_a_host_folder_is_refused_and_the_host_folder_kept() {
    let v = volume();
    let dir = v.volume.clone();
    let first = Payload::from([("a".into(), file("1"))]);
    let written = SystemPodFiles.write_atomically(
        &dir,
        &first,
        &FilesOwnership::default(),
        "2026_01_01_00_00_00.1",
    );
    assert!(matches!(written, Ok(true)), "{written:?}");
    // CVE-2017-1002102: the container replaces `..data` with a link to a host folder;
    // the next update must neither read nor remove it.
    for target in [
        v.host.display().to_string(),
        "../../../../host".into(),
        "..x".into(),
    ] {
        let _ = std::fs::remove_file(dir.join("..data"));
        symlink(&target, dir.join("..data")).unwrap_or_else(|e| panic!("link: {e}"));
        let second = Payload::from([("a".into(), file("2"))]);
        let got = SystemPodFiles.write_atomically(
            &dir,
            &second,
            &FilesOwnership::default(),
            "2026_01_01_00_00_05.2",
        );
        assert!(
            matches!(got, Err(PodFilesError::ForeignDataLink { .. })),
            "{target}: {got:?}"
        );
        v.host_unchanged();
    }
    // A user-visible name replaced by a link to the host is not followed on removal.
    let _ = std::fs::remove_file(dir.join("..data"));
    symlink("..2026_01_01_00_00_00.1", dir.join("..data")).unwrap_or_else(|e| panic!("{e}"));
    let _ = std::fs::remove_file(dir.join("a"));
    symlink(&v.host, dir.join("a")).unwrap_or_else(|e| panic!("link: {e}"));
    let got = SystemPodFiles.write_atomically(
        &dir,
        &Payload::new(),
        &FilesOwnership::default(),
        "2026_01_01_00_00_06.3",
    );
    assert!(matches!(got, Ok(true)), "{got:?}");
    v.host_unchanged();
}

#[test]
fn writer_folder_names_are_upstreams_time_stamps_only() {
    assert!(is_writer_folder("..2026_11_23_19_40_12.123456789"));
    assert!(is_writer_folder("..2019_01_01_00_00_00.981519434"));
    for bad in [
        "..data",
        "/etc",
        "..",
        "..2026_11_23_19_40_12.",
        "..2026_11_23_19_40_12.1/..",
        "2026_11_23_19_40_12.1",
    ] {
        assert!(!is_writer_folder(bad), "{bad}");
    }
}

/// Upstream's global map on the kernel: a loop device over a file stands for the device
/// a driver publishes; the map binds it, holds it with a second loop device, is kept on
/// a second call, and is undone whole.
#[test]
#[ignore = "needs root (mount, loop devices): run by scripts/test.sh"]
fn a_block_device_is_mapped_held_by_a_loop_device_and_unmapped() {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
    let backing = dir.path().join("disk");
    std::fs::write(&backing, vec![0u8; 1 << 20]).unwrap_or_else(|e| panic!("disk: {e}"));
    // The "published" device: a loop device over the file, as the hostpath driver makes.
    let attached = block::attach_loop_device(&backing);
    let device = block::loop_device_over(&backing);
    let map = dir.path().join("volumeDevices/pv/dev/uid-1");
    let first = device
        .as_deref()
        .map(|device| SystemPodFiles.map_block_device(device, &map));
    let again = device
        .as_deref()
        .map(|device| SystemPodFiles.map_block_device(device, &map));
    let mapped = std::fs::metadata(&map).ok();
    let device_rdev = device
        .as_deref()
        .and_then(|d| std::fs::metadata(d).ok())
        .map(|m| m.rdev());
    let holders = block::loop_devices_over(&map);
    let undone = SystemPodFiles.unmap_block_device(&map);
    let held_after = block::loop_devices_over(&map);
    let gone = !map.exists();
    let twice = SystemPodFiles.unmap_block_device(&map);
    // Clean up the stand-in device before asserting.
    if let Some(device) = &device {
        let _ = block::detach_loop_device(device);
    }
    assert!(attached.is_ok(), "{attached:?}");
    assert!(
        device.is_some(),
        "the stand-in device was found by its backing file"
    );
    assert!(matches!(first, Some(Ok(()))), "{first:?}");
    assert!(matches!(again, Some(Ok(()))), "{again:?}");
    let mapped = mapped.unwrap_or_else(|| panic!("{} missing", map.display()));
    assert!(mapped.file_type().is_block_device());
    assert_eq!(Some(mapped.rdev()), device_rdev, "the map shows the device");
    assert_eq!(
        holders.len(),
        1,
        "one loop device holds the map: {holders:?}"
    );
    assert!(undone.is_ok(), "{undone:?}");
    assert_eq!(held_after, Vec::<PathBuf>::new());
    assert!(gone, "the map file removed");
    assert!(twice.is_ok(), "a missing map is already undone: {twice:?}");
}
