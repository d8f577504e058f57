"""The public-tier MedHELM scenarios (registered into registry.SCENARIOS on import)."""
from medhelm_core.scenarios.public import (  # noqa: F401
    csv_files,
    ehr_sql,
    huggingface,
    json_files,
    med_qa,
    mtsamples,
    office_files,
)
