use super::*;

fn sizes(codes: bool, gated: bool, favor: bool) -> Sizes {
    Sizes {
        d: 32,
        h: 2,
        dh: 16,
        r: if codes { 8 } else { 16 },
        dir: 8,
        m: if favor { 16 } else { 8 },
        ff: 64,
        inp: 824,
        out: 256,
        layers: 2,
        mode: Mode::Rows { piano: 568 },
        codes: if codes { 2 * 16 * 8 } else { 0 },
        gated,
        favor,
    }
}

/// Every form of the template (codes or none, gated or not, FAVOR+ or ReLU, the default
/// models' sizes, rows and tokens) is valid WGSL for naga, the compiler wgpu uses natively.
#[test]
fn the_template_is_valid_wgsl() {
    use burn::backend::wgpu::wgpu::naga;
    let default = Sizes {
        d: 128,
        h: 4,
        dh: 32,
        r: 32,
        dir: 32,
        m: 64,
        ff: 512,
        inp: 824,
        out: 256,
        layers: 4,
        mode: Mode::Rows { piano: 568 },
        codes: 4 * 32 * 32,
        gated: true,
        favor: true,
    };
    let tokens = |s: Sizes| Sizes {
        inp: VOCAB_SIZE as u32,
        out: VOCAB_SIZE as u32,
        mode: Mode::Tokens,
        ..s
    };
    let forms = [
        sizes(true, true, true),
        sizes(true, false, true),
        sizes(false, false, true),
        sizes(true, true, false),
        default,
        tokens(sizes(true, true, true)),
        tokens(sizes(false, false, false)),
        tokens(default),
    ];
    for s in forms {
        let source = FusedKernel(s).source().complete();
        assert!(!source.contains("{{"), "unfilled placeholder: {s:?}");
        let module = naga::front::wgsl::parse_str(&source)
            .unwrap_or_else(|e| panic!("{s:?}: {}", e.emit_to_string(&source)));
        naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            naga::valid::Capabilities::empty(),
        )
        .validate(&module)
        .unwrap_or_else(|e| panic!("{s:?}: {e:?}"));
        assert!(s.workgroup_floats() * 4 <= WORKGROUP_BYTES, "{s:?}");
    }
}
