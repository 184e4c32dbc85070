//! The container hash the kubelet records on each container and compares to decide
//! whether a running container still matches its spec.

use super::*;

/// A hash of the container fields whose change means "restart it": since
/// Kubernetes 1.31 only the name and the image. FNV-1a 64 is written out
/// here because the value is persisted in container labels and must not
/// change between builds, which std's hasher does not promise.
pub fn container_hash(container: &Container) -> u64 {
    let mut hash = Fnv1a64::new();
    hash.write(container.name.as_bytes());
    // A separator keeps ("ab", "c") and ("a", "bc") apart.
    hash.write(&[0]);
    hash.write(container.image.as_bytes());
    hash.finish()
}

struct Fnv1a64(u64);

impl Fnv1a64 {
    fn new() -> Self {
        Fnv1a64(0xcbf2_9ce4_8422_2325)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_hash_depends_on_name_and_image_only() {
        let a = Container {
            name: "web".into(),
            image: "nginx:1.25".into(),
            ..Container::default()
        };
        let mut b = a.clone();
        b.command = vec!["sh".into()];
        b.env.push(EnvVar {
            name: "X".into(),
            value: "1".into(),
        });
        assert_eq!(container_hash(&a), container_hash(&b));
        b.image = "nginx:1.26".into();
        assert_ne!(container_hash(&a), container_hash(&b));
        let split1 = Container {
            name: "ab".into(),
            image: "c".into(),
            ..Container::default()
        };
        let split2 = Container {
            name: "a".into(),
            image: "bc".into(),
            ..Container::default()
        };
        assert_ne!(container_hash(&split1), container_hash(&split2));
        // Pinned so a change of algorithm (which would restart every
        // container after an upgrade) cannot slip through.
        let empty = Container {
            name: String::new(),
            image: String::new(),
            ..Container::default()
        };
        // FNV-1a 64 of the single byte 0.
        assert_eq!(container_hash(&empty), 0xaf63_bd4c_8601_b7df);
    }
}
