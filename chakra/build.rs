//! Compiles the Chakra schema (`proto/et_def.proto`) into Rust types with prost-build, parsing
//! it with protox (pure Rust), so a fresh machine needs no `protoc`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/et_def.proto");
    let descriptors = protox::compile(["proto/et_def.proto"], ["proto"])?;
    prost_build::Config::new().compile_fds(descriptors)?;
    Ok(())
}
