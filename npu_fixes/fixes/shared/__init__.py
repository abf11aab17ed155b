"""Helpers that several fixes use, one module per family: fallback registration
(:mod:`.registration`), the int32 boundary (:mod:`.narrowing`), ``make_launcher`` probes
(:mod:`.launcher`), the Triton generation (:mod:`.triton_generation`), the promoted-reduction
rewrite (:mod:`.promoted`), linearize mode (:mod:`.linearize`), the rsplit predicate
(:mod:`.rsplit`) and a CPU codegen kernel (:mod:`.codegen_kernel`). No fix is defined here and
nothing here is a fix: fix modules import from this package and never from one another, so
each can be deleted the day upstream fixes its defect.
"""
