//! A client of rkubelet's pod resources API (v1) on its unix socket, as monitoring agents
//! and upstream's `podresources_test.go` use it.

use std::path::PathBuf;

use hyper_util::rt::TokioIo;
use rkubelet::adapters::device_plugins::wire::podresources as pr;
use tonic::transport::{Endpoint, Uri};

pub type Client =
    pr::pod_resources_lister_client::PodResourcesListerClient<tonic::transport::Channel>;

/// Connected to `socket` (`<root-dir>/pod-resources/kubelet.sock`).
pub async fn client(socket: PathBuf) -> Client {
    let channel = Endpoint::from_static("http://localhost")
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let socket = socket.clone();
            async move {
                tokio::net::UnixStream::connect(socket)
                    .await
                    .map(TokioIo::new)
            }
        }))
        .await
        .expect("the pod resources socket answers");
    pr::pod_resources_lister_client::PodResourcesListerClient::new(channel)
}
