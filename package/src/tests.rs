use super::*;
use std::io::Cursor;

use cairn_sdk::PropertySchema;

const TYPE: &str = "Example::Notes::Note";

fn schema() -> Vec<u8> {
    let mut s = ResourceSchema::new(TYPE);
    s.description = "A note".into();
    s.properties
        .insert("Title".into(), PropertySchema::string().required());
    s.primary_identifier = vec!["Title".into()];
    serde_json::to_vec(&schema::to_cloudformation(&s)).unwrap()
}

fn builder() -> Builder {
    Builder::new(TypeKind::Resource, TYPE)
        .description("Notes")
        .handler(Handler::Dylib {
            file: "handler/libnotes.so".into(),
            target: "x86_64-unknown-linux-gnu".into(),
        })
        .file(SCHEMA, schema())
        .file("handler/libnotes.so", b"\x7fELF the library".to_vec())
}

/// A key pair: (public key in base64, secret key).
fn keys() -> (String, minisign::SecretKey) {
    let kp = minisign::KeyPair::generate_unencrypted_keypair().unwrap();
    (kp.pk.to_base64(), kp.sk)
}

fn sign(b: &Builder, sk: &minisign::SecretKey) -> String {
    minisign::sign(None, sk, Cursor::new(b.manifest_bytes()), None, None)
        .unwrap()
        .into_string()
}

/// The package's files, each changed by `change` (or left out when it
/// returns `None`), packed again as they are: the manifest untouched.
fn repack(bytes: &[u8], change: impl Fn(&str, Vec<u8>) -> Option<Vec<u8>>) -> Vec<u8> {
    let files = unpack(bytes).unwrap();
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut tar = tar::Builder::new(gz);
    for (path, content) in files {
        if let Some(content) = change(&path, content) {
            let mut header = tar::Header::new_gnu();
            header.set_size(content.len() as u64);
            header.set_mode(0o644);
            header.set_cksum();
            tar.append_data(&mut header, &path, content.as_slice())
                .unwrap();
        }
    }
    tar.into_inner().unwrap().finish().unwrap()
}

fn flip_last_byte(mut content: Vec<u8>) -> Vec<u8> {
    if let Some(b) = content.last_mut() {
        *b ^= 1;
    }
    content
}

#[test]
fn a_package_opens_with_its_manifest_schema_and_library() {
    let bytes = builder().build(None).unwrap();
    let p = open(&bytes, &[]).unwrap();
    assert_eq!(p.manifest.type_name, TYPE);
    assert_eq!(p.manifest.kind, TypeKind::Resource);
    assert_eq!(p.schema.type_name, TYPE);
    assert_eq!(p.library().map(|(f, _)| f), Some("handler/libnotes.so"));
    assert_eq!(p.signed_by, None);
    assert_eq!(p.sha256, sha256_hex(&bytes));
    assert_eq!(
        p.manifest.files.keys().collect::<Vec<_>>(),
        ["handler/libnotes.so", "schema.json"]
    );
    // The same inputs make the same package.
    assert_eq!(builder().build(None).unwrap(), bytes);
}

#[test]
fn one_byte_changed_in_the_schema_or_the_library_is_refused_by_name() {
    let bytes = builder().build(None).unwrap();
    for changed in [SCHEMA, "handler/libnotes.so"] {
        let tampered = repack(&bytes, |path, content| {
            Some(if path == changed {
                flip_last_byte(content)
            } else {
                content
            })
        });
        match open(&tampered, &[]) {
            Err(PackageError::ChecksumMismatch { file, .. }) => assert_eq!(file, changed),
            other => panic!("{changed} changed: {other:?}"),
        }
    }
}

#[test]
fn a_file_added_or_left_out_is_refused() {
    let bytes = builder().build(None).unwrap();
    let mut files = unpack(&bytes).unwrap();
    files.insert("handler/extra.so".into(), b"more".to_vec());
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut tar = tar::Builder::new(gz);
    for (path, content) in &files {
        let mut header = tar::Header::new_gnu();
        header.set_size(content.len() as u64);
        header.set_cksum();
        tar.append_data(&mut header, path, content.as_slice())
            .unwrap();
    }
    let with_extra = tar.into_inner().unwrap().finish().unwrap();
    assert_eq!(
        open(&with_extra, &[]).err(),
        Some(PackageError::UnlistedFile("handler/extra.so".into()))
    );
    let without_library = repack(&bytes, |path, content| {
        (path != "handler/libnotes.so").then_some(content)
    });
    assert_eq!(
        open(&without_library, &[]).err(),
        Some(PackageError::MissingFile("handler/libnotes.so".into()))
    );
}

#[test]
fn trusted_keys_require_a_signature_by_one_of_them() {
    let (public, secret) = keys();
    let (other_public, _) = keys();
    let b = builder();
    let signature = sign(&b, &secret);
    let signed = b.build(Some(&signature)).unwrap();
    let unsigned = builder().build(None).unwrap();

    assert_eq!(
        open(&signed, std::slice::from_ref(&public))
            .unwrap()
            .signed_by,
        Some(public.clone())
    );
    // Among several trusted keys, the one that signed.
    assert_eq!(
        open(&signed, &[other_public.clone(), public.clone()])
            .unwrap()
            .signed_by,
        Some(public.clone())
    );
    assert_eq!(
        open(&unsigned, std::slice::from_ref(&public)).err(),
        Some(PackageError::Unsigned)
    );
    assert!(matches!(
        open(&signed, std::slice::from_ref(&other_public)),
        Err(PackageError::UntrustedSignature(_))
    ));
    // Without trusted keys, a signature is not required.
    assert!(open(&unsigned, &[]).is_ok());
}

#[test]
fn a_manifest_changed_after_signing_is_refused() {
    let (public, secret) = keys();
    let b = builder();
    let signature = sign(&b, &secret);
    let signed = b.build(Some(&signature)).unwrap();
    // The library changed and the manifest made to match it: the
    // checksums agree, the signature does not.
    let tampered_library = b"\x7fELF another library".to_vec();
    let new_hash = sha256_hex(&tampered_library);
    let tampered = repack(&signed, |path, content| match path {
        "handler/libnotes.so" => Some(tampered_library.clone()),
        MANIFEST => {
            let mut m: Manifest = serde_json::from_slice(&content).unwrap();
            m.files
                .insert("handler/libnotes.so".into(), new_hash.clone());
            Some(serde_json::to_vec_pretty(&m).unwrap())
        }
        _ => Some(content),
    });
    assert!(open(&tampered, &[]).is_ok(), "unchecked without keys");
    assert!(matches!(
        open(&tampered, &[public]),
        Err(PackageError::UntrustedSignature(_))
    ));
}

#[test]
fn a_trusted_key_that_is_not_a_key_is_named() {
    let bytes = builder().build(Some("x")).unwrap();
    let refused = open(&bytes, &["not-a-key".into()]).err();
    assert!(
        matches!(&refused, Some(PackageError::UntrustedSignature(_))),
        "{refused:?}"
    );
    let (_, secret) = keys();
    let b = builder();
    let signature = sign(&b, &secret);
    let signed = b.build(Some(&signature)).unwrap();
    assert!(matches!(
        open(&signed, &["not-a-key".into()]),
        Err(PackageError::BadTrustedKey { .. })
    ));
}

#[test]
fn what_is_not_a_package_says_so() {
    assert!(matches!(
        open(b"plain text", &[]),
        Err(PackageError::NotAnArchive(_))
    ));
    let no_manifest = repack(&builder().build(None).unwrap(), |path, content| {
        (path != MANIFEST).then_some(content)
    });
    assert_eq!(
        open(&no_manifest, &[]).err(),
        Some(PackageError::NoManifest)
    );
}

#[test]
fn a_schema_naming_another_type_is_refused() {
    let bytes = Builder::new(TypeKind::Resource, "Example::Notes::Other")
        .file(SCHEMA, schema())
        .build(None)
        .unwrap();
    assert_eq!(
        open(&bytes, &[]).err(),
        Some(PackageError::TypeNameMismatch {
            manifest: "Example::Notes::Other".into(),
            schema: TYPE.into()
        })
    );
}

#[test]
fn paths_that_leave_the_package_are_refused_and_dot_slash_is_the_same_file() {
    let pack = |entries: &[(&str, &[u8])]| {
        let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        let mut tar = tar::Builder::new(gz);
        for (path, content) in entries {
            let mut header = tar::Header::new_gnu();
            header.set_size(content.len() as u64);
            // Written raw: the tar crate refuses `..` itself.
            header.as_gnu_mut().unwrap().name[..path.len()].copy_from_slice(path.as_bytes());
            header.set_cksum();
            tar.append(&header, *content).unwrap();
        }
        tar.into_inner().unwrap().finish().unwrap()
    };
    let good = builder();
    let manifest = good.manifest_bytes();
    let lib: &[u8] = b"\x7fELF the library";
    let schema_bytes = schema();
    let dotted = pack(&[
        ("./manifest.json", &manifest),
        ("./schema.json", &schema_bytes),
        ("./handler/libnotes.so", lib),
    ]);
    assert!(open(&dotted, &[]).is_ok(), "{:?}", open(&dotted, &[]).err());
    let escaping = pack(&[("../manifest.json", &manifest)]);
    assert_eq!(
        open(&escaping, &[]).err(),
        Some(PackageError::BadPath("../manifest.json".into()))
    );
}
