"""A Python plugin that misbehaves on demand (FAULT env var): raises in an entry point."""
import os

from hipdnn_cabi.plugin_sdk import EngineBase, EnginePluginBase, PlanBase, PlanBuilderBase, PluginError

FAULT = os.environ.get("FAULT", "")


def maybe(where):
    if FAULT == where:
        raise RuntimeError(f"boom in {where}")
    if FAULT == where + ":plugin_error":
        raise PluginError(5, f"declined in {where}")


class Plan(PlanBase):
    def get_workspace_size(self, handle):
        maybe("plan_ws")
        return 64

    def execute(self, handle, buffers, workspace):
        maybe("execute")
        buffers[42]


class Builder(PlanBuilderBase):
    def is_applicable(self, handle, graph):
        maybe("applicable")
        return True

    def get_max_workspace_size(self, handle, graph, config):
        maybe("workspace")
        return 64

    def build_plan(self, handle, graph, config):
        maybe("build")
        return Plan()


class Eng(EngineBase):
    name = "FAULTY_ENGINE"
    plan_builder = Builder()

    def get_details(self, handle, graph):
        maybe("details")
        return super().get_details(handle, graph)


class Faulty(EnginePluginBase):
    name = "faulty"
    engines = [Eng]

    def get_all_engine_ids(self):
        maybe("all_ids")
        if FAULT == "bad_ids":
            return ["not an id"]
        return super().get_all_engine_ids()

    def create_container(self):
        maybe("create")
        return super().create_container()


hipdnn_plugin = Faulty
