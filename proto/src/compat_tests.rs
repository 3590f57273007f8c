//! The API of each release is kept as a fixture — its encoded `FileDescriptorSet`,
//! `tests/fixtures/<tag>/airlock.v1.binpb`, what every client's stubs were generated from —
//! and the API of this build is checked against each: a client built against a release must
//! still talk to this daemon. Adding is free; what breaks a release's client is refused:
//!
//! - a message, enum, service or method gone;
//! - a field's number reused with another name, type or cardinality, or dropped without
//!   being reserved (number and name), so nothing reuses it later;
//! - an enum value's number with another name, or dropped without being reserved;
//! - a method's request, response or streaming changed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use prost::Message as _;
use prost_types::{
    DescriptorProto, EnumDescriptorProto, FileDescriptorSet, ServiceDescriptorProto,
};

use crate::v1::FILE_DESCRIPTOR_SET;

/// Every message, enum and service of `set` by its full name.
#[derive(Default)]
struct Api<'a> {
    messages: HashMap<String, &'a DescriptorProto>,
    enums: HashMap<String, &'a EnumDescriptorProto>,
    services: HashMap<String, &'a ServiceDescriptorProto>,
}

fn api(set: &FileDescriptorSet) -> Api<'_> {
    fn nested<'a>(api: &mut Api<'a>, scope: &str, message: &'a DescriptorProto) {
        let name = format!("{scope}.{}", message.name());
        for inner in &message.nested_type {
            nested(api, &name, inner);
        }
        for inner in &message.enum_type {
            api.enums.insert(format!("{name}.{}", inner.name()), inner);
        }
        api.messages.insert(name, message);
    }
    let mut api = Api::default();
    for file in &set.file {
        let scope = format!(".{}", file.package());
        for message in &file.message_type {
            nested(&mut api, &scope, message);
        }
        for inner in &file.enum_type {
            api.enums.insert(format!("{scope}.{}", inner.name()), inner);
        }
        for service in &file.service {
            api.services
                .insert(format!("{scope}.{}", service.name()), service);
        }
    }
    api
}

fn reserved_field(message: &DescriptorProto, number: i32, name: &str) -> bool {
    // Ranges are end-exclusive in a message's descriptor.
    message
        .reserved_range
        .iter()
        .any(|range| (range.start()..range.end()).contains(&number))
        && message
            .reserved_name
            .iter()
            .any(|reserved| reserved == name)
}

fn reserved_value(enumeration: &EnumDescriptorProto, number: i32, name: &str) -> bool {
    // Ranges are end-inclusive in an enum's descriptor.
    enumeration
        .reserved_range
        .iter()
        .any(|range| (range.start()..=range.end()).contains(&number))
        && enumeration
            .reserved_name
            .iter()
            .any(|reserved| reserved == name)
}

/// What in `new` breaks a client of `old`; empty when nothing does.
fn breaks(old: &FileDescriptorSet, new: &FileDescriptorSet) -> Vec<String> {
    let (old, new) = (api(old), api(new));
    let mut found = Vec::new();
    for (name, was) in &old.messages {
        let Some(now) = new.messages.get(name) else {
            found.push(format!("message {name} is gone"));
            continue;
        };
        for field in &was.field {
            match now.field.iter().find(|f| f.number() == field.number()) {
                None if reserved_field(now, field.number(), field.name()) => {}
                None => found.push(format!(
                    "{name}.{} (field {}) is gone without being reserved",
                    field.name(),
                    field.number()
                )),
                Some(f)
                    if f.name() != field.name()
                        || f.r#type() != field.r#type()
                        || f.type_name() != field.type_name()
                        || f.label() != field.label() =>
                {
                    found.push(format!(
                        "{name} field {} was `{:?} {:?} {} {}`, is `{:?} {:?} {} {}`",
                        field.number(),
                        field.label(),
                        field.r#type(),
                        field.type_name(),
                        field.name(),
                        f.label(),
                        f.r#type(),
                        f.type_name(),
                        f.name()
                    ));
                }
                Some(_) => {}
            }
        }
    }
    for (name, was) in &old.enums {
        let Some(now) = new.enums.get(name) else {
            found.push(format!("enum {name} is gone"));
            continue;
        };
        for value in &was.value {
            match now.value.iter().find(|v| v.number() == value.number()) {
                None if reserved_value(now, value.number(), value.name()) => {}
                None => found.push(format!(
                    "{name}.{} ({}) is gone without being reserved",
                    value.name(),
                    value.number()
                )),
                Some(v) if v.name() != value.name() => found.push(format!(
                    "{name} value {} was {}, is {}",
                    value.number(),
                    value.name(),
                    v.name()
                )),
                Some(_) => {}
            }
        }
    }
    for (name, was) in &old.services {
        let Some(now) = new.services.get(name) else {
            found.push(format!("service {name} is gone"));
            continue;
        };
        for method in &was.method {
            let Some(m) = now.method.iter().find(|m| m.name() == method.name()) else {
                found.push(format!("{name}.{} is gone", method.name()));
                continue;
            };
            if (
                m.input_type(),
                m.output_type(),
                m.client_streaming(),
                m.server_streaming(),
            ) != (
                method.input_type(),
                method.output_type(),
                method.client_streaming(),
                method.server_streaming(),
            ) {
                found.push(format!(
                    "{name}.{} changed its request, response or streaming",
                    method.name()
                ));
            }
        }
    }
    found.sort();
    found
}

fn releases() -> Vec<PathBuf> {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
    let mut found: Vec<PathBuf> = std::fs::read_dir(fixtures)
        .expect("tests/fixtures")
        .filter_map(|entry| Some(entry.ok()?.path().join("airlock.v1.binpb")))
        .filter(|path| path.exists())
        .collect();
    found.sort();
    found
}

fn decode(bytes: &[u8]) -> FileDescriptorSet {
    FileDescriptorSet::decode(bytes).expect("a FileDescriptorSet")
}

#[test]
fn a_client_of_every_release_still_talks_to_this_api() {
    let releases = releases();
    assert!(!releases.is_empty(), "no released API under tests/fixtures");
    let now = decode(FILE_DESCRIPTOR_SET);
    for release in releases {
        let old = decode(&std::fs::read(&release).expect("read"));
        let found = breaks(&old, &now);
        assert!(
            found.is_empty(),
            "this API breaks clients of {}:\n{}",
            release.display(),
            found.join("\n")
        );
    }
}

#[test]
fn the_check_finds_what_breaks_a_client() {
    let was = decode(FILE_DESCRIPTOR_SET);
    assert!(breaks(&was, &was).is_empty());

    // A field dropped, then the same dropped but reserved.
    let mut now = was.clone();
    let start = now
        .file
        .iter_mut()
        .flat_map(|file| file.message_type.iter_mut())
        .find(|message| message.name() == "StartRun")
        .expect("StartRun");
    let dropped = start.field.remove(0);
    assert_eq!(breaks(&was, &now).len(), 1, "{:?}", breaks(&was, &now));
    let start = now
        .file
        .iter_mut()
        .flat_map(|file| file.message_type.iter_mut())
        .find(|message| message.name() == "StartRun")
        .expect("StartRun");
    start
        .reserved_range
        .push(prost_types::descriptor_proto::ReservedRange {
            start: Some(dropped.number()),
            end: Some(dropped.number() + 1),
        });
    start.reserved_name.push(dropped.name().to_owned());
    assert!(breaks(&was, &now).is_empty(), "{:?}", breaks(&was, &now));

    // A field's type changed; a method's streaming changed; a service gone.
    let mut now = was.clone();
    let start = now
        .file
        .iter_mut()
        .flat_map(|file| file.message_type.iter_mut())
        .find(|message| message.name() == "StartRun")
        .expect("StartRun");
    use prost_types::field_descriptor_proto::Type;
    let other = if start.field[0].r#type() == Type::Bytes {
        Type::String
    } else {
        Type::Bytes
    };
    start.field[0].r#type = Some(other as i32);
    let file = now
        .file
        .iter_mut()
        .find(|file| !file.service.is_empty())
        .expect("a file with a service");
    file.service[0].method[0].server_streaming =
        Some(!file.service[0].method[0].server_streaming());
    assert_eq!(breaks(&was, &now).len(), 2, "{:?}", breaks(&was, &now));
    let mut now = was.clone();
    now.file
        .iter_mut()
        .find(|file| !file.service.is_empty())
        .expect("a file with a service")
        .service
        .remove(0);
    assert!(
        breaks(&was, &now)
            .iter()
            .any(|found| found.starts_with("service ")),
        "{:?}",
        breaks(&was, &now)
    );
}
