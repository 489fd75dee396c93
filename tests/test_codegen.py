"""Reading SASS: instructions, the main loop and the register-bank count of FFMAs, on hand-written listings."""

import pytest

from asyncpipe.codegen import Cubin, Instruction, bank_conflicts


def ffma(operands: str) -> Instruction:
    return Instruction(0, "", "FFMA", " " + operands)


def test_two_reads_in_one_bank_conflict():
    # R2 and R4 both in bank 0 (even), R3 in bank 1
    assert bank_conflicts([ffma("R1, R2, R4, R3")]).conflicted == 1
    assert bank_conflicts([ffma("R1, R2, R5, R7")]).conflicted == 1     # R5 and R7: bank 1
    assert bank_conflicts([ffma("R1, R2, R5, RZ")]).conflicted == 0     # RZ is no register read
    assert bank_conflicts([ffma("R1, R2, R5, R2")]).conflicted == 1     # one register read twice: two reads


def test_reuse_cache_serves_the_same_slot_and_register():
    rows = [ffma("R10, R2.reuse, R4, R11"), ffma("R12, R2.reuse, R6, R13"), ffma("R14, R2, R8, R15")]
    got = bank_conflicts(rows)
    # the first FFMA reads R2, R4 (bank 0 twice) and R11; the next two take R2 from the cache and read one
    # register of each bank
    assert (got.ffma, got.conflicted, got.reuse_flags) == (3, 1, 2)
    assert got.per_ffma == pytest.approx(1 / 3)
    # the same register flagged in another slot, or another instruction in between, is read again
    assert bank_conflicts([ffma("R10, R2.reuse, R4, R11"), ffma("R12, R6, R2, R14")]).conflicted == 2
    between = [ffma("R10, R2.reuse, R5, R11"), Instruction(0, "", "LDS.128", " R4, [R9]"), ffma("R12, R2, R4, R13")]
    assert bank_conflicts(between).conflicted == 2


def test_uniform_registers_are_not_counted():
    assert bank_conflicts([ffma("R1, R2, UR4, R6")]).conflicted == 1     # R2, R6; UR4 is another file
    assert bank_conflicts([ffma("R1, R2, UR4, R7")]).conflicted == 0


LISTING = """
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   LDS.128 R4, [R9] ;
        /*0020*/                   FFMA R10, R4.reuse, R5, R10 ;
        /*0030*/                   FFMA R13, R4, R6, R13 ;
        /*0040*/              @!PT NOP ;
        /*0050*/               @P0 BRA 0x10 ;
        /*0060*/                   EXIT ;
"""


def test_main_loop_is_the_longest_backward_branch():
    cubin = Cubin(b"", "sm_90a")
    cubin.__dict__["sass"] = LISTING                      # the cached property, given the listing directly
    assert [i.opcode for i in cubin.instructions] == ["MOV", "LDS.128", "FFMA", "FFMA", "NOP", "BRA", "EXIT"]
    assert [i.opcode for i in cubin.main_loop()] == ["LDS.128", "FFMA", "FFMA", "BRA"]     # no @!PT padding
    assert cubin.instructions[5].predicate == "@P0"
    got = cubin.ffma_bank_conflicts()      # three reads over two banks conflict; then R4 comes from the cache
    assert (got.ffma, got.conflicted, got.reuse_flags) == (2, 1, 1)


def test_no_loop_is_an_error():
    cubin = Cubin(b"", "sm_90a")
    cubin.__dict__["sass"] = "        /*0000*/                   EXIT ;\n"
    with pytest.raises(ValueError, match="no backward branch"):
        cubin.main_loop()


def test_without_the_sass_tools_the_error_names_the_extra(monkeypatch):
    import shutil
    import sys
    import tomllib
    from pathlib import Path

    from asyncpipe import codegen

    monkeypatch.setitem(sys.modules, "nvidia", None)               # no nvidia-* wheel: import nvidia fails
    monkeypatch.setattr(shutil, "which", lambda name: None)         # and nothing on PATH
    with pytest.raises(FileNotFoundError) as e:
        codegen._tool("cuobjdump")
    assert str(e.value) == ("cuobjdump not found: reading SASS needs the sass extra: pip install 'asyncpipe[sass]' "
                            "(the wheels nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm)")
    extras = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extras["sass"] == ["nvidia-cuda-cuobjdump>=13", "nvidia-cuda-nvdisasm>=13"]
    assert set(extras["sass"]) <= set(extras["test"])              # the test extra reads SASS too
