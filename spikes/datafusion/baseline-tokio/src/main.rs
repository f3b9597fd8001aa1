//! Build-cost baseline: the smallest async binary, to subtract from the spike's build time.
#[tokio::main]
async fn main() {
    let n = tokio::spawn(async { 40 + 2 }).await.unwrap();
    println!("{n}");
}
