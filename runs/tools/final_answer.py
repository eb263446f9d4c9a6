"""The tool that ends an agent's loop: its argument is the item's output."""

from __future__ import annotations

from typing import Any, ClassVar

from runs.plugins.tools import ToolError, ToolParams, ToolPlugin, register


@register
class FinalAnswerTool(ToolPlugin[ToolParams]):
    """Ends the loop: its ``answer`` argument is the item's output."""

    kind: ClassVar[str] = "final_answer"
    label: ClassVar[str] = "Final answer"
    description: ClassVar[str] = (
        "Give the final answer; nothing else is called after it."
    )
    example: ClassVar[dict[str, Any]] = {}
    arguments: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"answer": {"description": "The final answer."}},
        "required": ["answer"],
    }
    final: ClassVar[bool] = True

    async def call(self, arguments: dict[str, Any]) -> Any:
        if "answer" not in arguments:
            raise ToolError("the argument answer is missing", error_type="BadArguments")
        return arguments["answer"]
