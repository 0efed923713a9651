# Weir server image (used by docker-compose.yml).
FROM rust:1-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends libclang-dev && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo build --release --bin weir

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates libstdc++6 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/weir /usr/local/bin/weir
EXPOSE 5488
ENTRYPOINT ["weir"]
CMD ["serve", "--pg-listen", "0.0.0.0:5488", "--data-dir", "/var/lib/weir"]
