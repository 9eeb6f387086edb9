//! The Chakra ET file: one rank's trace, a sequence of messages each preceded by its length as
//! a protobuf varint — a `GlobalMetadata` first, then the `Node`s — gzip-compressed when the
//! file's name ends in `.gz`. A malformed file (a truncated length or message, bytes that do
//! not decode, no metadata) is an error naming the message and byte offset, never a panic.

use std::io::{Read, Write};
use std::path::Path;

use prost::Message;

use crate::error::ChakraError;
use crate::schema::{GlobalMetadata, Node};

/// The schema version npusim writes in `GlobalMetadata.version` (Chakra's current one).
pub const SCHEMA_VERSION: &str = "0.0.4";

/// One rank's execution trace.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EtFile {
    /// The first message.
    pub metadata: GlobalMetadata,
    /// The nodes, in file order.
    pub nodes: Vec<Node>,
}

/// Whether `path` names a gzip-compressed trace.
fn gzipped(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "gz")
}

impl EtFile {
    /// A trace with metadata of npusim's schema version and no nodes.
    pub fn new() -> Self {
        Self {
            metadata: GlobalMetadata {
                version: SCHEMA_VERSION.to_string(),
                attr: Vec::new(),
            },
            nodes: Vec::new(),
        }
    }

    /// Reads a trace file (gunzipping it when its name ends in `.gz`).
    pub fn read(path: impl AsRef<Path>) -> Result<Self, ChakraError> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let io = |source| ChakraError::Io {
            path: name.clone(),
            source,
        };
        let raw = std::fs::read(path).map_err(io)?;
        let bytes = if gzipped(path) {
            let mut out = Vec::new();
            flate2::read::GzDecoder::new(&raw[..])
                .read_to_end(&mut out)
                .map_err(|e| {
                    ChakraError::malformed(&name, format!("the name ends in .gz, but: {e}"))
                })?;
            out
        } else {
            raw
        };
        Self::decode(&bytes, &name)
    }

    /// Decodes a trace's bytes; `path` names it in errors.
    pub fn decode(bytes: &[u8], path: &str) -> Result<Self, ChakraError> {
        let mut at = 0usize;
        let mut index = 0usize;
        let mut next = |what: &str| -> Result<Option<&[u8]>, ChakraError> {
            if at == bytes.len() {
                return Ok(None);
            }
            let start = at;
            let (len, used) = varint(&bytes[at..]).map_err(|e| {
                ChakraError::malformed(
                    path,
                    format!("the length of message {index} ({what}) at byte {start} {e}"),
                )
            })?;
            at += used;
            let left = bytes.len() - at;
            if len > left as u64 {
                return Err(ChakraError::malformed(
                    path,
                    format!(
                        "truncated: message {index} ({what}) at byte {start} is {len} bytes long, \
                         {left} are left"
                    ),
                ));
            }
            let msg = &bytes[at..at + len as usize];
            at += len as usize;
            index += 1;
            Ok(Some(msg))
        };
        let meta = next("the GlobalMetadata")?.ok_or_else(|| {
            ChakraError::malformed(path, "empty: a Chakra trace starts with a GlobalMetadata")
        })?;
        let metadata = GlobalMetadata::decode(meta).map_err(|e| {
            ChakraError::malformed(
                path,
                format!("message 0 is not a GlobalMetadata (a Chakra trace starts with one): {e}"),
            )
        })?;
        let mut nodes = Vec::new();
        while let Some(msg) = next("a Node")? {
            let node = Node::decode(msg).map_err(|e| {
                ChakraError::malformed(
                    path,
                    format!("message {} is not a Node: {e}", nodes.len() + 1),
                )
            })?;
            nodes.push(node);
        }
        Ok(Self { metadata, nodes })
    }

    /// The trace's bytes (uncompressed).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let mut put = |m: &dyn Fn(&mut Vec<u8>)| m(&mut out);
        put(&|o| {
            self.metadata
                .encode_length_delimited(o)
                .expect("a Vec grows")
        });
        for n in &self.nodes {
            put(&|o| n.encode_length_delimited(o).expect("a Vec grows"));
        }
        out
    }

    /// Writes the trace (gzip-compressed when the name ends in `.gz`).
    pub fn write(&self, path: impl AsRef<Path>) -> Result<(), ChakraError> {
        let path = path.as_ref();
        let io = |source| ChakraError::Io {
            path: path.display().to_string(),
            source,
        };
        let bytes = self.encode();
        if gzipped(path) {
            let file = std::fs::File::create(path).map_err(io)?;
            let mut gz = flate2::write::GzEncoder::new(file, flate2::Compression::default());
            gz.write_all(&bytes).map_err(io)?;
            gz.finish().map_err(io)?;
            Ok(())
        } else {
            std::fs::write(path, bytes).map_err(io)
        }
    }
}

/// A protobuf varint at the start of `b`: (value, bytes used), or what is wrong with it.
fn varint(b: &[u8]) -> Result<(u64, usize), &'static str> {
    let mut v = 0u64;
    for (i, &byte) in b.iter().enumerate().take(10) {
        if i == 9 && byte > 1 {
            return Err("overflows 64 bits");
        }
        v |= ((byte & 0x7f) as u64) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok((v, i + 1));
        }
    }
    if b.len() < 10 {
        Err("is truncated (the file ends inside it)")
    } else {
        Err("overflows 64 bits")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{AttributeProto, NodeType};

    fn sample() -> EtFile {
        let mut f = EtFile::new();
        for id in 0..3u64 {
            f.nodes.push(Node {
                id,
                name: format!("gemm{id}"),
                r#type: NodeType::CompNode as i32,
                data_deps: id.checked_sub(1).into_iter().collect(),
                attr: vec![AttributeProto::int64("num_ops", 1 << 40)],
                ..Node::default()
            });
        }
        f
    }

    fn dir() -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("npusim-chakra-file-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_trace_reads_back_as_written_plain_and_gzipped() {
        let f = sample();
        for name in ["t.0.et", "t.0.et.gz"] {
            let p = dir().join(name);
            f.write(&p).unwrap();
            assert_eq!(EtFile::read(&p).unwrap(), f, "{name}");
        }
        // Gzip is what the name says, not the content.
        let plain = std::fs::read(dir().join("t.0.et")).unwrap();
        let gz = std::fs::read(dir().join("t.0.et.gz")).unwrap();
        assert_eq!(&gz[..2], [0x1f, 0x8b]);
        assert_ne!(plain, gz);
    }

    #[test]
    fn each_message_is_preceded_by_its_varint_length() {
        let bytes = sample().encode();
        let meta_len = bytes[0] as usize;
        // GlobalMetadata { version: "0.0.4" }: field 1, length 5.
        assert_eq!(&bytes[1..1 + meta_len], b"\x0a\x050.0.4");
        let node = &bytes[1 + meta_len..];
        assert!(node[0] as usize + 1 < node.len());
    }

    #[test]
    fn malformed_files_are_refused_with_what_is_wrong() {
        let bytes = sample().encode();
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (Vec::new(), "empty"),
            (bytes[..bytes.len() - 3].to_vec(), "truncated: message 3"),
            (vec![0x80], "is truncated"),
            (vec![0xff; 11], "overflows 64 bits"),
            // A length of 2 around bytes that are no GlobalMetadata (field 1 as a varint).
            (vec![2, 0x08, 0x01], "not a GlobalMetadata"),
            // Metadata, then a "node" whose field 1 (id) is a length-delimited string.
            (
                [&bytes[..bytes[0] as usize + 1], &[3, 0x0a, 1, b'x']].concat(),
                "not a Node",
            ),
        ];
        for (b, says) in cases {
            let e = EtFile::decode(&b, "bad.et").unwrap_err();
            assert!(e.to_string().contains(says), "{says}: {e}");
            assert!(e.to_string().starts_with("bad.et: "), "{e}");
        }
        let p = dir().join("not-gzip.et.gz");
        std::fs::write(&p, &bytes).unwrap();
        let e = EtFile::read(&p).unwrap_err();
        assert!(e.to_string().contains("ends in .gz"), "{e}");
        let e = EtFile::read(dir().join("missing.et")).unwrap_err();
        assert!(matches!(e, ChakraError::Io { .. }), "{e}");
    }

    #[test]
    fn no_prefix_or_flipped_byte_of_a_trace_panics() {
        let bytes = sample().encode();
        for n in 0..bytes.len() {
            // Every prefix ends inside a message (an error) or between two (fewer nodes).
            match EtFile::decode(&bytes[..n], "p.et") {
                Ok(f) => assert!(f.nodes.len() < 3, "prefix {n}"),
                Err(e) => assert!(e.to_string().starts_with("p.et: "), "{e}"),
            }
        }
        let mut changed = 0;
        for i in 0..bytes.len() {
            for bit in 0..8 {
                let mut b = bytes.clone();
                b[i] ^= 1 << bit;
                if EtFile::decode(&b, "f.et").ok() != Some(sample()) {
                    changed += 1;
                }
            }
        }
        // Most flips show (an error or other content); none panicked to get here.
        assert!(changed > bytes.len() * 4, "{changed}");
    }
}
