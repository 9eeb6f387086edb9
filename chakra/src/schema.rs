//! The Chakra ET messages as prost compiled them from `proto/et_def.proto` (field numbers as
//! Chakra publishes them), and the typed attributes npusim reads and writes.
//!
//! Chakra's own writers and ASTRA-sim's reader agree on one value type per attribute
//! (`num_ops`, `comm_type`, `comm_size`: int64; `tensor_size`: uint64; `comm_src`,
//! `comm_dst`, `comm_tag`: int32; `pg_name`: string; `is_cpu_op`: bool). npusim writes those
//! types and, reading, takes an integer attribute from any of the integer value types, since
//! hand-written traces are not always that careful.

#![allow(missing_docs)]

include!(concat!(env!("OUT_DIR"), "/chakra_proto_msg.rs"));

use attribute_proto::Value;

impl AttributeProto {
    fn with(name: &str, value: Value) -> Self {
        Self {
            name: name.to_string(),
            doc_string: String::new(),
            value: Some(value),
        }
    }

    /// An `int64` attribute (`num_ops`, `comm_type`, `comm_size`).
    pub fn int64(name: &str, v: i64) -> Self {
        Self::with(name, Value::Int64Val(v))
    }

    /// A `uint64` attribute (`tensor_size`).
    pub fn uint64(name: &str, v: u64) -> Self {
        Self::with(name, Value::Uint64Val(v))
    }

    /// An `int32` attribute (`comm_src`, `comm_dst`, `comm_tag`).
    pub fn int32(name: &str, v: i32) -> Self {
        Self::with(name, Value::Int32Val(v))
    }

    /// A `string` attribute (`pg_name`).
    pub fn string(name: &str, v: &str) -> Self {
        Self::with(name, Value::StringVal(v.to_string()))
    }

    /// A `bool` attribute (`is_cpu_op`).
    pub fn boolean(name: &str, v: bool) -> Self {
        Self::with(name, Value::BoolVal(v))
    }

    /// The value as an integer, whichever integer (or bool) type holds it; `None` for other
    /// types, lists and a negative value.
    pub fn as_u64(&self) -> Option<u64> {
        let v: i128 = match self.value.as_ref()? {
            Value::Int32Val(v) | Value::Sint32Val(v) | Value::Sfixed32Val(v) => *v as i128,
            Value::Int64Val(v) | Value::Sint64Val(v) | Value::Sfixed64Val(v) => *v as i128,
            Value::Uint32Val(v) | Value::Fixed32Val(v) => *v as i128,
            Value::Uint64Val(v) | Value::Fixed64Val(v) => *v as i128,
            Value::BoolVal(b) => *b as i128,
            _ => return None,
        };
        u64::try_from(v).ok()
    }

    /// The value as a string (`None` unless a string).
    pub fn as_str(&self) -> Option<&str> {
        match self.value.as_ref()? {
            Value::StringVal(s) => Some(s),
            _ => None,
        }
    }
}

impl Node {
    /// The attribute named `name`, if the node has it.
    pub fn attr(&self, name: &str) -> Option<&AttributeProto> {
        self.attr.iter().find(|a| a.name == name)
    }

    /// An integer attribute: `Ok(None)` when absent, an error message when it holds no
    /// non-negative integer.
    pub fn attr_u64(&self, name: &str) -> Result<Option<u64>, String> {
        match self.attr(name) {
            None => Ok(None),
            Some(a) => a.as_u64().map(Some).ok_or_else(|| {
                format!(
                    "attribute {name} is {}, not a non-negative integer",
                    describe(a.value.as_ref())
                )
            }),
        }
    }

    /// A string attribute (`None` when absent or not a string).
    pub fn attr_str(&self, name: &str) -> Option<&str> {
        self.attr(name).and_then(AttributeProto::as_str)
    }

    /// A bool attribute, false when absent.
    pub fn attr_bool(&self, name: &str) -> bool {
        self.attr(name).and_then(AttributeProto::as_u64) == Some(1)
    }

    /// Its ctrl and data dependencies, in that order (a node may list one in both).
    pub fn deps(&self) -> impl Iterator<Item = u64> + '_ {
        self.ctrl_deps.iter().chain(&self.data_deps).copied()
    }
}

/// A value's type, for messages.
fn describe(v: Option<&Value>) -> &'static str {
    match v {
        None => "unset",
        Some(Value::DoubleVal(_) | Value::FloatVal(_)) => "a float",
        Some(Value::StringVal(_)) => "a string",
        Some(Value::BytesVal(_)) => "bytes",
        Some(_) => "a list",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn integer_attributes_read_from_any_integer_type() {
        let node = Node {
            attr: vec![
                AttributeProto::int64("num_ops", 7),
                AttributeProto::uint64("tensor_size", 9),
                AttributeProto::int32("comm_tag", -1),
                AttributeProto::string("pg_name", "tp0"),
            ],
            ..Node::default()
        };
        assert_eq!(node.attr_u64("num_ops"), Ok(Some(7)));
        assert_eq!(node.attr_u64("tensor_size"), Ok(Some(9)));
        assert_eq!(node.attr_u64("comm_size"), Ok(None));
        assert!(node.attr_u64("comm_tag").unwrap_err().contains("comm_tag"));
        assert!(node.attr_u64("pg_name").unwrap_err().contains("a string"));
        assert_eq!(node.attr_str("pg_name"), Some("tp0"));
    }

    #[test]
    fn a_node_has_chakras_field_numbers_on_the_wire() {
        // id = 5 (field 1, varint), type = COMP_NODE (field 3, varint 4), duration_micros = 2
        // (field 7): the bytes Chakra's Python writer gives for the same node.
        let node = Node {
            id: 5,
            r#type: NodeType::CompNode as i32,
            duration_micros: 2,
            ..Node::default()
        };
        assert_eq!(node.encode_to_vec(), [0x08, 5, 0x18, 4, 0x38, 2]);
        let attr = AttributeProto::int64("n", 3);
        // name (field 1, length 1), int64_val (field 9, varint).
        assert_eq!(attr.encode_to_vec(), [0x0a, 1, b'n', 0x48, 3]);
    }
}
