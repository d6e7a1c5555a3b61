FROM langchain/langgraph-api:0.16.7-py3.11



# -- Adding local package . --
ADD . /deps/memory-graph-agent
# -- End of local package . --

# -- Installing all local dependencies --
RUN for dep in /deps/*; do             echo "Installing $dep";             if [ -d "$dep" ]; then                 echo "Installing $dep";                 (cd "$dep" && PYTHONDONTWRITEBYTECODE=1 uv pip install --system --no-cache-dir -c /api/constraints.txt -e .);             fi;         done
# -- End of local dependencies install --
ENV LANGGRAPH_AUTH='{"path": "/deps/memory-graph-agent/memory_graph_agent/auth/handlers.py:auth", "disable_studio_auth": true}'
ENV LANGGRAPH_HTTP='{"app": "/deps/memory-graph-agent/memory_graph_agent/webapp.py:app", "enable_custom_route_auth": true}'
ENV LANGGRAPH_CHECKPOINTER='{"ttl": {"strategy": "keep_latest", "default_ttl": 1440, "sweep_interval_minutes": 60}}'
ENV LANGSERVE_GRAPHS='{"memory_agent": "/deps/memory-graph-agent/graph/builder.py:make_graph", "maintenance": "/deps/memory-graph-agent/graph/maintenance.py:make_graph"}'



# -- Ensure user deps didn't inadvertently overwrite langgraph-api
RUN mkdir -p /api/langgraph_api /api/langgraph_runtime /api/langgraph_license && touch /api/langgraph_api/__init__.py /api/langgraph_runtime/__init__.py /api/langgraph_license/__init__.py
RUN PYTHONDONTWRITEBYTECODE=1 uv pip install --system --no-cache-dir --no-deps -e /api
# -- End of ensuring user deps didn't inadvertently overwrite langgraph-api --
# -- Removing build deps from the final image ~<:===~~~ --
RUN pip uninstall -y pip setuptools wheel
RUN rm -rf /usr/local/lib/python*/site-packages/pip* /usr/local/lib/python*/site-packages/setuptools* /usr/local/lib/python*/site-packages/wheel* && find /usr/local/bin -name "pip*" -delete || true
RUN rm -rf /usr/lib/python*/site-packages/pip* /usr/lib/python*/site-packages/setuptools* /usr/lib/python*/site-packages/wheel* && find /usr/bin -name "pip*" -delete || true
RUN uv pip uninstall --system pip setuptools wheel && rm /usr/bin/uv /usr/bin/uvx

WORKDIR /deps/memory-graph-agent