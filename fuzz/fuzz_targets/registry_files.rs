#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rimthan_fuzz::registry_files(data));
