"""Settings read from environment variables (and an optional .env file)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Everything a deployment may change, each with a default that works out of the box."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore", populate_by_name=True)

    database_url: str = Field(
        "sqlite:///playbook.db",
        validation_alias="PLAYBOOK_DATABASE_URL",
        description="SQLAlchemy URL of the playbook database.",
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = Field(
        "INFO", validation_alias="LOG_LEVEL"
    )
    log_format: Literal["text", "json"] = Field("text", validation_alias="LOG_FORMAT")
    actor: str | None = Field(
        None,
        validation_alias="PLAYBOOK_ACTOR",
        description="Name recorded in revisions made from the CLI (default cli:<login>).",
    )

    @field_validator("log_level", "log_format", mode="before")
    @classmethod
    def _case_insensitive(cls, value: object, info: ValidationInfo) -> object:
        # People write LOG_LEVEL=debug; accept it rather than fail on case.
        if not isinstance(value, str):
            return value
        return value.upper() if info.field_name == "log_level" else value.lower()
