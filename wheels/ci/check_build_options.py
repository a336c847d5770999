"""Resolve cibuildwheel's options per build identifier and check the ones that matter.

Usage (from the repository root, with the cibuildwheel of
wheels/ci/requirements.txt installed)::

    python wheels/ci/check_build_options.py wheels/ci/cibuildwheel.toml
    python wheels/ci/check_build_options.py --repair-command wheels/ci/cibuildwheel.toml

``--print-build-identifiers`` shows *which* wheels would be built; this shows
*how*, after cibuildwheel has merged the platform tables and the overrides:
the environment each build gets (OpenMP required everywhere, the macOS
deployment target and the libomp prefix of its own architecture), the
manylinux image, the before-all step and the test command.  It uses
cibuildwheel's internal ``compute_options``, which is why the version is
pinned.
"""

import dataclasses
import sys

from cibuildwheel.options import CommandLineArguments, compute_options

LIBOMP = "/tmp/cropgrad-libomp"
CASES = [
    ("linux", "cp311-manylinux_x86_64"),
    ("linux", "cp314t-manylinux_x86_64"),
    ("linux", "cp311-manylinux_aarch64"),
    ("linux", "cp314t-manylinux_aarch64"),
    ("macos", "cp311-macosx_x86_64"),
    ("macos", "cp314t-macosx_x86_64"),
    ("macos", "cp311-macosx_arm64"),
    ("macos", "cp314t-macosx_arm64"),
]
DEPLOYMENT_TARGET = {"x86_64": "10.15", "arm64": "11.0"}
LICENCE_STEP = "python {project}/wheels/ci/bundle_licenses.py {dest_dir}"


def check(config_file):
    args = dataclasses.replace(CommandLineArguments.defaults(), config_file=config_file)
    errors = []
    for platform, identifier in CASES:
        options = compute_options(platform, args, env={}).build_options(identifier)
        env = options.environment.as_dictionary(prev_environment={})
        test_env = options.test_environment.as_dictionary(prev_environment={})
        arch = identifier.split("-", 1)[1].split("_", 1)[
            1
        ]  # manylinux_x86_64 -> x86_64
        print(f"{identifier}: environment {env}")

        def expect(what, actual, wanted):
            if actual != wanted:
                errors.append(
                    f"{identifier}: {what} is {actual!r}, expected {wanted!r}"
                )

        expect("CROPGRAD_OPENMP", env.get("CROPGRAD_OPENMP"), "required")
        expect(
            "test-command", options.test_command, "python wheels/ci/test_wheel.py tests"
        )
        expect(
            "PYTHONSAFEPATH in the test environment",
            test_env.get("PYTHONSAFEPATH"),
            "1",
        )
        if "wheels/ci/test_wheel.py" not in options.test_sources:
            errors.append(f"{identifier}: test-sources lack the test runner")
        if platform == "linux":
            image = options.manylinux_images[arch]
            print(f"{identifier}: image {image.split('@')[0]}")
            if "/manylinux_2_28_" not in image:
                errors.append(f"{identifier}: image {image} is not manylinux_2_28")
        else:
            print(f"{identifier}: before-all {options.before_all!r}")
            expect(
                "MACOSX_DEPLOYMENT_TARGET",
                env.get("MACOSX_DEPLOYMENT_TARGET"),
                DEPLOYMENT_TARGET[arch],
            )
            expect("CPPFLAGS", env.get("CPPFLAGS"), f"-I{LIBOMP}/{arch}/include")
            expect(
                "LDFLAGS",
                env.get("LDFLAGS"),
                f"-L{LIBOMP}/{arch}/lib -Wl,-rpath,{LIBOMP}/{arch}/lib",
            )
            if "macos_libomp.sh" not in options.before_all:
                errors.append(f"{identifier}: before-all does not fetch libomp")
            if "delocate-wheel" not in options.repair_command:
                errors.append(f"{identifier}: the repair step is not delocate")
        if platform == "linux" and "auditwheel repair" not in options.repair_command:
            errors.append(f"{identifier}: the repair step is not auditwheel")
        # The bundled runtime's licence is added after the repair bundled it.
        if not options.repair_command.endswith(LICENCE_STEP):
            errors.append(
                f"{identifier}: the repair step does not end with {LICENCE_STEP!r}: "
                f"{options.repair_command!r}"
            )
    return errors


def repair_command(config_file, identifier="cp311-manylinux_x86_64"):
    """The repair-wheel-command cibuildwheel resolves for `identifier`."""
    args = dataclasses.replace(CommandLineArguments.defaults(), config_file=config_file)
    platform = "macos" if "macosx" in identifier else "linux"
    return (
        compute_options(platform, args, env={}).build_options(identifier).repair_command
    )


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--repair-command":
        # For verify_local.sh, which runs the Linux repair step as configured.
        print(repair_command(sys.argv[2]))
        sys.exit(0)
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} [--repair-command] CIBUILDWHEEL_TOML")
    problems = check(sys.argv[1])
    if problems:
        sys.exit("build options:\n  " + "\n  ".join(problems))
    print(f"build options: {len(CASES)} identifiers resolved as intended")
