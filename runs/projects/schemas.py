"""The API schemas of projects, members, API keys and secrets."""

from __future__ import annotations

from datetime import datetime

from ninja import Field, Schema

from runs.models import ApiKey, Membership, ProjectSecret
from runs.web.schemas import BodyIn


class ProjectIn(BodyIn):
    name: str = Field(min_length=1, max_length=200)
    description: str = ""


class ProjectOut(Schema):
    id: int
    name: str
    description: str
    created_at: datetime
    role: Membership.Role = Field(description="your role in the project")
    member_count: int


class MemberIn(BodyIn):
    user: str = Field(
        min_length=1,
        max_length=254,
        description="the username or email address of an existing user",
    )
    role: Membership.Role = Membership.Role.EDITOR


class MemberPatch(BodyIn):
    role: Membership.Role


class MemberOut(Schema):
    user: int = Field(alias="user_id", description="the user's id")
    username: str
    role: Membership.Role
    created_at: datetime

    @staticmethod
    def resolve_username(obj: Membership) -> str:
        return obj.user.get_username()


class ApiKeyIn(BodyIn):
    name: str = Field(min_length=1, max_length=100, description="what the key is for")


class ApiKeyOut(Schema):
    id: int
    name: str
    prefix: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None
    active: bool

    @staticmethod
    def resolve_active(obj: ApiKey) -> bool:
        return obj.is_active


class ApiKeyCreatedOut(ApiKeyOut):
    key: str = Field(description="the key itself, returned only this once")


class SecretIn(BodyIn):
    value: str | None = Field(
        None,
        description=(
            "the secret's value (at most 8192 characters, no control characters); "
            "stored encrypted and never returned. Required for a new secret; "
            "left out, an existing secret keeps its value"
        ),
    )
    hosts: list[str] | None = Field(
        None,
        max_length=100,
        description=(
            "where the secret may be sent: host (https on port 443), *.suffix "
            "(names below suffix), or scheme://host:port (http must be written "
            'out), e.g. ["api.openai.com", "http://127.0.0.1:8000"]. Required '
            "for a new secret; left out, an existing secret keeps its hosts"
        ),
    )


class SecretOut(Schema):
    """A project secret's name and history; its value is never returned."""

    name: str
    hosts: list[str] = Field(
        description="where the secret may be sent; none: nowhere until bound"
    )
    created_at: datetime
    updated_at: datetime
    updated_by: str | None = Field(
        None, description="who last set the value or the hosts"
    )

    @staticmethod
    def resolve_updated_by(obj: ProjectSecret) -> str | None:
        return obj.updated_by.get_username() if obj.updated_by else None
