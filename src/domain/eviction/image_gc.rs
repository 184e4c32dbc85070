//! Image garbage collection (upstream's image GC manager, its decisions): which images
//! the node has seen and when each was last used, how much to free when the image
//! filesystem is over `imageGCHighThresholdPercent`, and which images go first: unused
//! ones, least recently used first, never one a container uses, never one younger than
//! `imageMinimumGCAge`.

use std::collections::{BTreeMap, BTreeSet};

/// Upstream's defaults.
pub const DEFAULT_HIGH_THRESHOLD_PERCENT: i32 = 85;
pub const DEFAULT_LOW_THRESHOLD_PERCENT: i32 = 80;
pub const DEFAULT_MINIMUM_GC_AGE_SECS: u64 = 120;

/// `imageGCHighThresholdPercent`, `imageGCLowThresholdPercent`, `imageMinimumGCAge`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageGcPolicy {
    pub high_threshold_percent: i32,
    pub low_threshold_percent: i32,
    pub min_age_nanos: i64,
}

impl Default for ImageGcPolicy {
    fn default() -> Self {
        ImageGcPolicy {
            high_threshold_percent: DEFAULT_HIGH_THRESHOLD_PERCENT,
            low_threshold_percent: DEFAULT_LOW_THRESHOLD_PERCENT,
            min_age_nanos: i64::try_from(DEFAULT_MINIMUM_GC_AGE_SECS).unwrap_or(0) * 1_000_000_000,
        }
    }
}

/// An image the runtime holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PresentImage {
    pub id: String,
    pub size_bytes: u64,
    /// The runtime asks that it be kept (CRI `pinned`).
    pub pinned: bool,
    /// Its repository tags and digests.
    pub names: Vec<String>,
}

/// The reference as the runtime names it: Docker Hub's `docker.io/library/` for a bare
/// name, `docker.io/` for a user's, `:latest` when neither a tag nor a digest is given.
pub fn normalized_reference(image: &str) -> String {
    let (name, suffix) = match image.find('@') {
        Some(at) => (&image[..at], &image[at..]),
        None => match image.rfind(':') {
            Some(colon) if !image[colon..].contains('/') => (&image[..colon], &image[colon..]),
            _ => (image, ":latest"),
        },
    };
    let first = name.split('/').next().unwrap_or_default();
    let has_registry =
        name.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost");
    let name = if has_registry {
        name.to_owned()
    } else if name.contains('/') {
        format!("docker.io/{name}")
    } else {
        format!("docker.io/library/{name}")
    };
    format!("{name}{suffix}")
}

/// The ids of the images the kubelet's pods name (`wanted`), whether or not a container
/// runs them yet: image GC keeps them, so an image pulled for a pod that has not started
/// is not removed under it (upstream counts only the runtime's containers).
pub fn wanted_image_ids(images: &[PresentImage], wanted: &[String]) -> BTreeSet<String> {
    let wanted: BTreeSet<String> = wanted.iter().map(|w| normalized_reference(w)).collect();
    images
        .iter()
        .filter(|i| {
            wanted.contains(&i.id)
                || i.names
                    .iter()
                    .any(|n| wanted.contains(&normalized_reference(n)))
        })
        .map(|i| i.id.clone())
        .collect()
}

/// What the kubelet remembers of an image (wall clock, Unix nanoseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ImageRecord {
    /// 0: already there when the kubelet started (upstream's zero time).
    pub first_detected: i64,
    /// 0: never seen in use.
    pub last_used: i64,
    pub size_bytes: u64,
    pub pinned: bool,
}

/// Why image garbage collection failed, in upstream's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageGcError {
    #[error("invalid capacity 0 on image filesystem")]
    InvalidCapacity,
    #[error("Failed to garbage collect required amount of images. Attempted to free {wanted} bytes, but only found {freed} bytes eligible to free.")]
    NotEnoughFreed { wanted: i64, freed: i64 },
}

/// The images seen, by id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageRecords {
    records: BTreeMap<String, ImageRecord>,
}

impl ImageRecords {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    pub fn get(&self, id: &str) -> Option<&ImageRecord> {
        self.records.get(id)
    }

    /// Upstream `detectImages`: new images are recorded as detected at `detect_time`
    /// (0 on the first pass: they were there before), images in use get `now` as their
    /// last use, images gone are forgotten.
    pub fn detect(
        &mut self,
        images: &[PresentImage],
        in_use: &BTreeSet<String>,
        detect_time: i64,
        now: i64,
    ) {
        let present: BTreeSet<&str> = images.iter().map(|i| i.id.as_str()).collect();
        self.records.retain(|id, _| present.contains(id.as_str()));
        for image in images {
            let record = self.records.entry(image.id.clone()).or_insert(ImageRecord {
                first_detected: detect_time,
                ..ImageRecord::default()
            });
            if in_use.contains(&image.id) {
                record.last_used = now;
            }
            record.size_bytes = image.size_bytes;
            record.pinned = image.pinned;
        }
    }

    /// Upstream `freeSpace`'s order: the images that may go, least recently used first
    /// (ties: first detected first), each with its size. Left out: images in use,
    /// pinned ones, ones used at or after `free_time`, and ones detected less than
    /// `min_age_nanos` before it (just pulled, about to be used).
    pub fn removal_order(
        &self,
        in_use: &BTreeSet<String>,
        free_time: i64,
        min_age_nanos: i64,
    ) -> Vec<(String, u64)> {
        let mut candidates: Vec<(&String, &ImageRecord)> = self
            .records
            .iter()
            .filter(|(id, r)| {
                !in_use.contains(*id)
                    && !r.pinned
                    && r.last_used < free_time
                    && free_time.saturating_sub(r.first_detected) >= min_age_nanos
            })
            .collect();
        candidates.sort_by_key(|(_, r)| (r.last_used, r.first_detected));
        candidates
            .into_iter()
            .map(|(id, r)| (id.clone(), r.size_bytes))
            .collect()
    }

    pub fn forget(&mut self, id: &str) {
        self.records.remove(id);
    }
}

/// How many bytes image GC must free on an image filesystem of `capacity` with
/// `available` free (upstream `GarbageCollect`): none below the high threshold, else
/// down to the low threshold.
pub fn bytes_to_free(
    policy: &ImageGcPolicy,
    capacity: i64,
    available: i64,
) -> Result<Option<i64>, ImageGcError> {
    let available = available.min(capacity);
    if capacity <= 0 {
        return Err(ImageGcError::InvalidCapacity);
    }
    let usage_percent = 100 - available.saturating_mul(100) / capacity;
    if usage_percent < i64::from(policy.high_threshold_percent) {
        return Ok(None);
    }
    let low_free = capacity.saturating_mul(100 - i64::from(policy.low_threshold_percent)) / 100;
    Ok(Some(low_free - available))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(i: u32, size: u64) -> PresentImage {
        PresentImage {
            names: Vec::new(),
            id: format!("image-{i}"),
            size_bytes: size,
            pinned: false,
        }
    }

    fn used(ids: &[u32]) -> BTreeSet<String> {
        ids.iter().map(|i| format!("image-{i}")).collect()
    }

    const SEC: i64 = 1_000_000_000;
    const NOW: i64 = 1_700_000_000 * SEC;

    /// What upstream's `freeSpace` would remove to free `bytes`, assuming each removal
    /// succeeds.
    fn free(
        records: &ImageRecords,
        in_use: &BTreeSet<String>,
        bytes: u64,
        at: i64,
        min_age: i64,
    ) -> (u64, Vec<String>) {
        let mut freed = 0;
        let mut gone = Vec::new();
        for (id, size) in records.removal_order(in_use, at, min_age) {
            gone.push(id);
            freed += size;
            if freed >= bytes {
                break;
            }
        }
        (freed, gone)
    }

    /// Ported from upstream TestDetectImagesInitialDetect and TestDetectImagesWithNewImage.
    #[test]
    fn detection_records_first_seen_and_last_used() {
        let mut records = ImageRecords::new();
        records.detect(
            &[image(0, 1024), image(1, 2048), image(2, 2048)],
            &used(&[1, 2]),
            0,
            NOW,
        );
        assert_eq!(records.len(), 3);
        assert_eq!(
            records.get("image-0"),
            Some(&ImageRecord {
                first_detected: 0,
                last_used: 0,
                size_bytes: 1024,
                pinned: false
            })
        );
        assert_eq!(
            records
                .get("image-1")
                .map(|r| (r.first_detected, r.last_used)),
            Some((0, NOW))
        );
        records.detect(
            &[
                image(0, 1024),
                image(1, 1024),
                image(2, 1024),
                image(3, 1024),
            ],
            &used(&[1]),
            NOW + SEC,
            NOW + SEC,
        );
        assert_eq!(
            records
                .get("image-3")
                .map(|r| (r.first_detected, r.last_used)),
            Some((NOW + SEC, 0))
        );
        assert_eq!(records.get("image-1").map(|r| r.size_bytes), Some(1024));
    }

    /// Ported from upstream TestDetectImagesContainerStopped and
    /// TestDetectImagesWithRemovedImages.
    #[test]
    fn a_stopped_container_keeps_its_last_use_and_removed_images_are_forgotten() {
        let mut records = ImageRecords::new();
        records.detect(&[image(0, 1024), image(1, 2048)], &used(&[1]), 0, NOW);
        records.detect(
            &[image(0, 1024), image(1, 2048)],
            &used(&[]),
            NOW + SEC,
            NOW + SEC,
        );
        assert_eq!(records.get("image-1").map(|r| r.last_used), Some(NOW));
        records.detect(&[], &used(&[]), NOW + 2 * SEC, NOW + 2 * SEC);
        assert!(records.is_empty());
    }

    /// Ported from upstream TestFreeSpaceImagesInUseContainersAreIgnored and
    /// TestDeleteUnusedImagesRemoveAllUnusedImages.
    #[test]
    fn images_in_use_never_go() {
        let mut records = ImageRecords::new();
        records.detect(&[image(0, 1024), image(1, 2048)], &used(&[1]), 0, NOW);
        assert_eq!(
            free(&records, &used(&[1]), 2048, NOW, 0),
            (1024, vec!["image-0".to_owned()])
        );
        let mut records = ImageRecords::new();
        records.detect(
            &[image(0, 1024), image(1, 2048), image(2, 2048)],
            &used(&[2]),
            0,
            NOW,
        );
        let (_, gone) = free(&records, &used(&[2]), u64::MAX, NOW, 0);
        assert_eq!(gone, ["image-0", "image-1"]);
    }

    /// Ported from upstream TestFreeSpaceRemoveByLeastRecentlyUsed.
    #[test]
    fn least_recently_used_first() {
        let mut records = ImageRecords::new();
        records.detect(&[image(0, 1024), image(1, 2048)], &used(&[0, 1]), 0, NOW);
        records.detect(
            &[image(0, 1024), image(1, 2048)],
            &used(&[1]),
            NOW + SEC,
            NOW + SEC,
        );
        records.detect(
            &[image(0, 1024), image(1, 2048)],
            &used(&[]),
            NOW + 2 * SEC,
            NOW + 2 * SEC,
        );
        assert_eq!(
            free(&records, &used(&[]), 1024, NOW + 60 * SEC, 0),
            (1024, vec!["image-0".to_owned()])
        );
    }

    /// Ported from upstream TestFreeSpaceTiesBrokenByDetectedTime.
    #[test]
    fn ties_go_to_the_first_detected() {
        let mut records = ImageRecords::new();
        records.detect(&[image(0, 1024)], &used(&[0]), 0, NOW);
        records.detect(&[image(0, 1024), image(1, 2048)], &used(&[0]), NOW, NOW);
        records.detect(
            &[image(0, 1024), image(1, 2048)],
            &used(&[]),
            NOW + SEC,
            NOW + SEC,
        );
        // Both were last used at NOW (image 1 never, but it was detected at NOW): image 1
        // has last_used 0, so it is older and goes first.
        assert_eq!(
            free(&records, &used(&[]), 1024, NOW + 2 * SEC, 0),
            (2048, vec!["image-1".to_owned()])
        );
    }

    /// Ported from upstream TestGarbageCollectImageNotOldEnough.
    #[test]
    fn young_images_stay() {
        let mut records = ImageRecords::new();
        records.detect(&[image(0, 1024), image(1, 2048)], &used(&[1]), NOW, NOW);
        assert_eq!(
            free(&records, &used(&[1]), 1024, NOW, 60 * SEC),
            (0, vec![])
        );
        assert_eq!(
            free(&records, &used(&[1]), 1024, NOW + 60 * SEC, 60 * SEC),
            (1024, vec!["image-0".to_owned()])
        );
    }

    /// Ported from upstream TestDeletePinnedImage / TestDoNotDeletePinnedImage.
    #[test]
    fn pinned_images_stay() {
        let mut records = ImageRecords::new();
        let mut pinned = image(0, 1024);
        pinned.pinned = true;
        records.detect(&[pinned, image(1, 1024)], &used(&[]), 0, NOW);
        assert_eq!(free(&records, &used(&[]), 4096, NOW, 0).1, ["image-1"]);
    }

    /// Ported from upstream TestGarbageCollectBelowLowThreshold, ...BelowSuccess,
    /// ...NotEnoughFreed (the amount), and the capacity check.
    #[test]
    fn amount_to_free() {
        let policy = ImageGcPolicy {
            high_threshold_percent: 90,
            low_threshold_percent: 80,
            min_age_nanos: 0,
        };
        assert_eq!(bytes_to_free(&policy, 1000, 600), Ok(None));
        assert_eq!(bytes_to_free(&policy, 1000, 50), Ok(Some(150)));
        assert_eq!(bytes_to_free(&policy, 1000, 100), Ok(Some(100)));
        assert_eq!(
            bytes_to_free(&policy, 0, 0),
            Err(ImageGcError::InvalidCapacity)
        );
        // More available than capacity (a racy statfs): treated as all free.
        assert_eq!(bytes_to_free(&policy, 1000, 2000), Ok(None));
        assert_eq!(
            ImageGcError::NotEnoughFreed { wanted: 150, freed: 50 }.to_string(),
            "Failed to garbage collect required amount of images. Attempted to free 150 bytes, but only found 50 bytes eligible to free."
        );
    }

    #[test]
    fn images_named_by_pods_are_wanted_under_any_of_their_names() {
        assert_eq!(
            normalized_reference("busybox"),
            "docker.io/library/busybox:latest"
        );
        assert_eq!(normalized_reference("me/app:1"), "docker.io/me/app:1");
        assert_eq!(
            normalized_reference("localhost:5000/app"),
            "localhost:5000/app:latest"
        );
        assert_eq!(
            normalized_reference("registry.k8s.io/pause@sha256:abc"),
            "registry.k8s.io/pause@sha256:abc"
        );
        let mut busybox = image(1, 10);
        busybox.names = vec!["docker.io/library/busybox:1.36".into()];
        let mut other = image(2, 10);
        other.names = vec!["docker.io/library/other:1".into()];
        let wanted = wanted_image_ids(&[busybox, other], &["busybox:1.36".into()]);
        assert_eq!(wanted, BTreeSet::from([image(1, 10).id]));
    }
}
