"""Wrong argument types of the public API are usage errors naming what is expected."""
from __future__ import annotations

import pytest

import datacheck
from datacheck.model.errors import UsageError


@pytest.mark.parametrize("paths", [123, None, [1, "a.parquet"], {"a": 1}])
def test_audit_with_paths_of_another_type_is_a_usage_error(paths):
    with pytest.raises(UsageError, match="paths must be a path"):
        datacheck.audit(paths)


def test_audit_with_a_config_of_another_type_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="config must be a path to datacheck.toml"):
        datacheck.audit(str(tmp_path), config=42)
