"""An example spu tool domain: ideal-gas molar volume and a Henderson-Hasselbalch buffer pH.

Everything the server needs to know about the domain is declared here, in one object named in
``pyproject.toml``'s ``spu.tools`` entry points: its tools, the engine it computes with (for
``system_info`` and provenance), a ``spu doctor`` check and its own error code.
"""

from tools_server.plugin import DoctorCheck, Domain, Engine

DOCTOR_CHECK = DoctorCheck(
    name="example-scipy",
    what="SciPy constants (example plugin)",
    # Runs in a fresh interpreter; report() prints the result doctor reads. Compare with a known value:
    # R = N_A k = 8.31446261815324 J/(mol K) exactly (the 2019 SI defining constants).
    code="""
    import scipy
    from scipy.constants import R
    assert abs(R - 8.31446261815324) < 1e-12, f"R = {R}"
    report(version=scipy.__version__, detail=f"R = {R} J/(mol K)")
    """,
    fix="pip install scipy",
    profile="optional",
)

DOMAIN = Domain(
    name="example",
    tool_modules=("spu_example_plugin.tools",),
    engines=(Engine("scipy", "scipy"),),
    doctor_checks=(DOCTOR_CHECK,),
    error_codes={
        "buffer_out_of_range": "Use the full acid-base equilibrium instead of Henderson-Hasselbalch.",
    },
)
