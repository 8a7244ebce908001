//! The protobuf schema the decoder walks, built once from the descriptor set that build.rs compiles from the
//! .proto files (the contract). It needs no Python: field and enum value names are [`Name`]s, whose Python
//! strings are made when a value first crosses the binding.

use std::collections::HashMap;

use prost::Message as _;
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, FileDescriptorSet};

use crate::value::Name;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Int32,
    Int64,
    UInt32,
    UInt64,
    SInt32,
    SInt64,
    Bool,
    Enum(usize),
    String,
    Bytes,
    Message(usize),
    Fixed32,
    Fixed64,
    SFixed32,
    SFixed64,
    Float,
    Double,
}

impl Kind {
    /// The wire type a singular value of this kind is written with.
    pub fn wire_type(self) -> u8 {
        match self {
            Kind::Fixed64 | Kind::SFixed64 | Kind::Double => 1,
            Kind::String | Kind::Bytes | Kind::Message(_) => 2,
            Kind::Fixed32 | Kind::SFixed32 | Kind::Float => 5,
            _ => 0,
        }
    }
}

pub struct Field {
    pub number: u32,
    pub name: Name,
    pub kind: Kind,
    pub repeated: bool,
    pub required: bool,
}

pub struct MessageType {
    pub full_name: String,
    pub fields: Vec<Field>, // by field number
    index: Vec<u16>,        // field number -> position in `fields` (NO_FIELD when absent)
    /// Positions of the required fields and of the message-typed ones: what checking initialization walks.
    pub required: Vec<u16>,
    pub message_fields: Vec<u16>,
}

const NO_FIELD: u16 = u16::MAX;

impl MessageType {
    #[inline]
    pub fn field(&self, number: u32) -> Option<usize> {
        match self.index.get(number as usize) {
            Some(&i) if i != NO_FIELD => Some(i as usize),
            _ => None,
        }
    }

    pub fn field_by_name(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name.as_str() == name)
    }
}

pub struct EnumType {
    pub full_name: String,
    values: Vec<(i32, Name)>, // by number: looked up per enum field decoded
}

impl EnumType {
    pub fn name(&self, number: i32) -> Option<&Name> {
        self.values.binary_search_by_key(&number, |(n, _)| *n).ok().map(|i| &self.values[i].1)
    }

    pub fn contains(&self, number: i32) -> bool {
        self.name(number).is_some()
    }

    /// The number a value name stands for.
    pub fn number(&self, name: &str) -> Option<i32> {
        self.values.iter().find(|(_, n)| n.as_str() == name).map(|(number, _)| *number)
    }

    /// (number, name) in number order.
    pub fn values(&self) -> impl Iterator<Item = (i32, &Name)> {
        self.values.iter().map(|(number, name)| (*number, name))
    }
}

pub struct Schema {
    pub messages: Vec<MessageType>,
    pub enums: Vec<EnumType>,
    by_name: HashMap<String, usize>,
    enum_by_name: HashMap<String, usize>,
}

impl Schema {
    pub fn message(&self, full_name: &str) -> usize {
        *self.by_name.get(full_name).unwrap_or_else(|| panic!("{full_name} is in the schema"))
    }

    pub fn enum_type(&self, full_name: &str) -> &EnumType {
        &self.enums[*self.enum_by_name.get(full_name).unwrap_or_else(|| panic!("{full_name} is in the schema"))]
    }

    /// A protocol's schema from its embedded descriptor set.
    pub fn load(descriptor: &[u8]) -> Schema {
        let set = FileDescriptorSet::decode(descriptor).expect("the embedded descriptor set decodes");
        let mut names: Vec<(String, &DescriptorProto)> = Vec::new();
        let mut enum_protos = Vec::new();
        for file in &set.file {
            let package = file.package.clone().unwrap_or_default();
            for m in &file.message_type {
                collect(&package, m, &mut names, &mut enum_protos);
            }
            for e in &file.enum_type {
                enum_protos.push((qualified(&package, e.name()), e.clone()));
            }
        }
        let by_name: HashMap<String, usize> = names.iter().enumerate().map(|(i, (n, _))| (n.clone(), i)).collect();
        let enum_by_name: HashMap<String, usize> =
            enum_protos.iter().enumerate().map(|(i, (n, _))| (n.clone(), i)).collect();
        let enums = enum_protos
            .iter()
            .map(|(name, e)| {
                let mut values: Vec<(i32, Name)> =
                    e.value.iter().map(|v| (v.number(), Name::owned(v.name().to_string()))).collect();
                values.sort_by_key(|(number, _)| *number);
                EnumType { full_name: name.clone(), values }
            })
            .collect();
        let messages = names
            .iter()
            .map(|(full_name, m)| {
                let mut fields: Vec<Field> = m
                    .field
                    .iter()
                    .map(|f| {
                        let type_name = f.type_name().trim_start_matches('.');
                        let kind = match f.r#type() {
                            Type::Int32 => Kind::Int32,
                            Type::Int64 => Kind::Int64,
                            Type::Uint32 => Kind::UInt32,
                            Type::Uint64 => Kind::UInt64,
                            Type::Sint32 => Kind::SInt32,
                            Type::Sint64 => Kind::SInt64,
                            Type::Bool => Kind::Bool,
                            Type::Enum => Kind::Enum(enum_by_name[type_name]),
                            Type::String => Kind::String,
                            Type::Bytes => Kind::Bytes,
                            Type::Message | Type::Group => Kind::Message(by_name[type_name]),
                            Type::Fixed32 => Kind::Fixed32,
                            Type::Fixed64 => Kind::Fixed64,
                            Type::Sfixed32 => Kind::SFixed32,
                            Type::Sfixed64 => Kind::SFixed64,
                            Type::Float => Kind::Float,
                            Type::Double => Kind::Double,
                        };
                        Field {
                            number: f.number() as u32,
                            name: Name::owned(f.name().to_string()),
                            kind,
                            repeated: f.label() == Label::Repeated,
                            required: f.label() == Label::Required,
                        }
                    })
                    .collect();
                fields.sort_by_key(|f| f.number);
                let top = fields.last().map(|f| f.number as usize + 1).unwrap_or(0);
                let mut index = vec![NO_FIELD; top];
                for (i, f) in fields.iter().enumerate() {
                    index[f.number as usize] = i as u16;
                }
                let positions = |keep: fn(&Field) -> bool| {
                    (0..fields.len() as u16).filter(|&i| keep(&fields[i as usize])).collect()
                };
                let required = positions(|f| f.required);
                let message_fields = positions(|f| matches!(f.kind, Kind::Message(_)));
                MessageType { full_name: full_name.clone(), fields, index, required, message_fields }
            })
            .collect();
        Schema { messages, enums, by_name, enum_by_name }
    }
}

/// A type's full name as descriptors refer to it (without their leading dot): `package.Name`, or `Name` in
/// a file without a package (TubeMQ's).
fn qualified(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_owned()
    } else {
        format!("{prefix}.{name}")
    }
}

fn collect<'a>(
    prefix: &str,
    m: &'a DescriptorProto,
    out: &mut Vec<(String, &'a DescriptorProto)>,
    enums: &mut Vec<(String, prost_types::EnumDescriptorProto)>,
) {
    let name = qualified(prefix, m.name());
    for e in &m.enum_type {
        enums.push((format!("{name}.{}", e.name()), e.clone()));
    }
    for nested in &m.nested_type {
        collect(&name, nested, out, enums);
    }
    out.push((name, m));
}
