//! Exports `cairn_provider_decl_v1`, but its declaration does not start with
//! Cairn's magic: the host must refuse it before calling anything in it.

use cairn_sdk::plugin::{self, Decl, StaticDecl};

static DECL: StaticDecl = StaticDecl(Decl {
    size: std::mem::size_of::<Decl>() as u32,
    magic: *b"NOTCAIRN",
    abi_version: plugin::ABI_VERSION,
    protocol_min: plugin::PROTOCOL_MIN,
    protocol_max: plugin::PROTOCOL_MAX,
    sdk_version: plugin::SDK_VERSION.as_ptr() as *const std::ffi::c_char,
    provider_name: c"wrong-magic".as_ptr(),
    provider_version: c"0.1.0".as_ptr(),
    init: plugin::plugin_init,
    call: plugin::plugin_call,
    cancel: plugin::plugin_cancel,
    free_buf: plugin::plugin_free_buf,
});

#[no_mangle]
pub extern "C" fn cairn_provider_decl_v1() -> *const Decl {
    &DECL.0
}
